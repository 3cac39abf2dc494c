//! What every command that draws a plot needs before it draws: a font.

use plotters::style::FontStyle;

/// Registers a TrueType font as "sans-serif" for plotters, from the usual system locations;
/// whether one was found (both the SVG and the PNG backends lay text out with it, so without
/// one a command draws no plot and says so).
///
/// ```
/// // True wherever DejaVu or Liberation is installed (scripts/main.sh installs DejaVu).
/// let _found: bool = tactor_cli::plot::register_font();
/// ```
pub fn register_font() -> bool {
    use std::sync::OnceLock;
    static DONE: OnceLock<bool> = OnceLock::new();
    *DONE.get_or_init(|| {
        let candidates = [
            "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/TTF/DejaVuSans.ttf",
            "/usr/share/fonts/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        ];
        for path in candidates {
            if let Ok(bytes) = std::fs::read(path) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}
