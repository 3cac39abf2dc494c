//! Matrix Market files (`coordinate` format, the one sparse matrices come in): the pattern
//! of nonzeros is read; values are checked to be numbers and otherwise ignored (Bale's apps
//! work on patterns). Symmetric files list one triangle; the other is mirrored. Anything else
//! is refused with one line naming the file, the line and what is wrong.

use super::Matrix;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// Reads the pattern of the Matrix Market file at `path`.
pub fn read(path: &Path) -> Result<Matrix, String> {
    let name = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("{name}: {e}"))?;
    parse(BufReader::new(file)).map_err(|e| format!("{name}: {e}"))
}

/// Parses Matrix Market text (see [`read`]).
///
/// ```
/// let text = "%%MatrixMarket matrix coordinate pattern symmetric\n% a comment\n3 3 2\n2 1\n3 3\n";
/// let m = bale::matrix::mm::parse(text.as_bytes()).unwrap();
/// assert_eq!((m.rows, m.cols, m.nnz()), (3, 3, 3));
/// assert_eq!(m.row(0), &[1]);
/// ```
pub fn parse(input: impl BufRead) -> Result<Matrix, String> {
    let mut lines = input.lines().enumerate();
    // The next line with content (comments start with `%` after the header), numbered.
    let mut next = || -> Result<Option<(usize, String)>, String> {
        for (i, line) in lines.by_ref() {
            let line = line.map_err(|e| format!("line {}: {e}", i + 1))?;
            let t = line.trim();
            if !(t.is_empty() || (i > 0 && t.starts_with('%'))) {
                return Ok(Some((i + 1, t.to_string())));
            }
        }
        Ok(None)
    };
    let (_, header) = next()?.ok_or("empty file: not a Matrix Market file")?;
    let words: Vec<String> = header
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    if words.first().map(String::as_str) != Some("%%matrixmarket") {
        return Err("line 1: not a Matrix Market file (no %%MatrixMarket header)".into());
    }
    // Bale writes its matrices without the symmetry word, and reads them as general.
    let (object, format, field, symmetry) = match words.as_slice() {
        [_, o, f, v] => (o, f, v, "general"),
        [_, o, f, v, s] => (o, f, v, s.as_str()),
        _ => {
            return Err(format!(
                "line 1: the header needs object, format, field and symmetry, got `{header}`"
            ))
        }
    };
    if object != "matrix" {
        return Err(format!("line 1: object `{object}`: only `matrix` is read"));
    }
    if format != "coordinate" {
        return Err(format!(
            "line 1: format `{format}`: only sparse `coordinate` files are read"
        ));
    }
    let values = match field.as_str() {
        "pattern" => 0,
        "real" | "integer" | "double" => 1,
        "complex" => 2,
        other => return Err(format!("line 1: unknown field `{other}`")),
    };
    let mirror = match symmetry {
        "general" => false,
        "symmetric" | "skew-symmetric" | "hermitian" => true,
        other => return Err(format!("line 1: unknown symmetry `{other}`")),
    };
    let (at, size) = next()?.ok_or("no size line after the header")?;
    let dims: Vec<u64> = size
        .split_whitespace()
        .map(|w| w.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("line {at}: the size line `{size}` is not three counts"))?;
    let [rows, cols, nnz] = dims.as_slice() else {
        return Err(format!(
            "line {at}: the size line `{size}` is not three counts"
        ));
    };
    let fits = |n: u64| n >= 1 && n <= u64::from(u32::MAX);
    if !fits(*rows) || !fits(*cols) {
        return Err(format!(
            "line {at}: a {rows} × {cols} matrix: rows and columns must be 1 to {}",
            u32::MAX
        ));
    }
    // The declared sizes decide what is allocated: a file of a few bytes may announce a
    // matrix larger than this machine.
    let stored = u128::from(*nnz) * if mirror { 2 } else { 1 };
    crate::memory::check_matrix((*rows).max(*cols), stored, &format!("line {at}"))?;
    let (rows, cols, nnz) = (*rows as u32, *cols as u32, *nnz);
    let mut entries = Vec::with_capacity(nnz.min(1 << 24) as usize);
    let mut seen = 0u64;
    while let Some((at, line)) = next()? {
        seen += 1;
        if seen > nnz {
            return Err(format!(
                "line {at}: more entries than the {nnz} the size line announces"
            ));
        }
        let mut w = line.split_whitespace();
        let mut index = |what: &str, limit: u32| -> Result<u32, String> {
            let v: u64 = w
                .next()
                .and_then(|x| x.parse().ok())
                .ok_or_else(|| format!("line {at}: `{line}`: no {what} index"))?;
            if v == 0 || v > u64::from(limit) {
                return Err(format!(
                    "line {at}: {what} {v} outside 1..={limit} (indices start at 1)"
                ));
            }
            Ok((v - 1) as u32)
        };
        let (r, c) = (index("row", rows)?, index("column", cols)?);
        // Ignored, but a value that is not a number is a damaged file, not a pattern.
        // (Fortran writes `1.5D+02`.)
        let number = |v: &str| {
            v.parse::<f64>().is_ok()
                || (v.contains(['D', 'd']) && v.replace(['D', 'd'], "e").parse::<f64>().is_ok())
        };
        let mut extra = 0;
        for v in w {
            if extra < values && !number(v) {
                return Err(format!(
                    "line {at}: `{line}`: the value `{v}` is not a number"
                ));
            }
            extra += 1;
        }
        if extra != values {
            return Err(format!(
                "line {at}: `{line}`: {extra} value(s) after the indices, the header's field `{field}` has {values}"
            ));
        }
        entries.push((r, c));
        if mirror && r != c {
            if c >= rows || r >= cols {
                return Err(format!(
                    "line {at}: a symmetric file must be square, this one is {rows} × {cols}"
                ));
            }
            entries.push((c, r));
        }
    }
    if seen < nnz {
        return Err(format!("{seen} entries, but the size line announces {nnz}"));
    }
    Ok(Matrix::from_entries(rows, cols, entries))
}

/// Writes `m` as a `coordinate pattern general` file (tests and users' inputs).
pub fn write(m: &Matrix, out: &mut impl std::io::Write) -> std::io::Result<()> {
    writeln!(out, "%%MatrixMarket matrix coordinate pattern general")?;
    writeln!(out, "{} {} {}", m.rows, m.cols, m.nnz())?;
    for (r, c) in m.entries() {
        writeln!(out, "{} {}", r + 1, c + 1)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text.as_bytes()).unwrap_err()
    }

    #[test]
    fn a_written_matrix_reads_back() {
        let m = super::super::generate::erdos_renyi(30, 20, 0.1, 4);
        let mut text = Vec::new();
        write(&m, &mut text).unwrap();
        assert_eq!(parse(&text[..]).unwrap(), m);
    }

    #[test]
    fn values_are_read_past_and_symmetric_files_mirrored() {
        let m = parse(
            "%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 1 0.5\n2 1 -3e4\n"
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(m.entries().collect::<Vec<_>>(), [(0, 0), (0, 1), (1, 0)]);
    }

    #[test]
    fn a_header_without_symmetry_is_general_as_bale_writes_it() {
        let m = parse("%%MatrixMarket matrix coordinate pattern\n2 2 1\n2 1\n".as_bytes());
        assert_eq!(m.unwrap().entries().collect::<Vec<_>>(), [(1, 0)]);
    }

    #[test]
    fn what_is_not_a_coordinate_matrix_is_named() {
        assert!(err("").contains("empty file"));
        assert!(err("hello\n").contains("not a Matrix Market file"));
        assert!(err("%%MatrixMarket matrix array real general\n2 2\n").contains("array"));
        assert!(err("%%MatrixMarket vector coordinate real general\n").contains("vector"));
        assert!(err("%%MatrixMarket matrix coordinate\n").contains("header needs"));
        assert!(err("%%MatrixMarket matrix coordinate real general x\n").contains("header needs"));
        let h = "%%MatrixMarket matrix coordinate pattern general\n";
        assert!(err(&format!("{h}2 x 1\n")).contains("three counts"));
        assert!(err(&format!("{h}0 2 1\n")).contains("rows and columns"));
        assert!(err(&format!("{h}2 2 1\n3 1\n")).contains("row 3 outside"));
        assert!(err(&format!("{h}2 2 1\n1 0\n")).contains("column 0 outside"));
        assert!(err(&format!("{h}2 2 2\n1 1\n")).contains("1 entries"));
        assert!(err(&format!("{h}2 2 1\n1 1\n2 2\n")).contains("more entries"));
        assert!(err(&format!("{h}2 2 1\n1 1 5\n")).contains("value(s)"));
        let real = "%%MatrixMarket matrix coordinate real general\n2 2 1\n";
        assert!(err(&format!("{real}1 1 abc\n")).contains("value `abc` is not a number"));
        let int = "%%MatrixMarket matrix coordinate integer general\n2 2 1\n";
        assert!(err(&format!("{int}1 1 x2\n")).contains("value `x2`"));
        assert!(parse(format!("{int}1 1 -7\n").as_bytes()).is_ok());
        assert!(parse(format!("{real}2 1 1.5D+02\n").as_bytes()).is_ok());
        let complex = "%%MatrixMarket matrix coordinate complex general\n2 2 1\n";
        assert!(err(&format!("{complex}1 1 1.0 x\n")).contains("value `x`"));
        let s = "%%MatrixMarket matrix coordinate pattern symmetric\n2 3 1\n2 3\n";
        assert!(err(s).contains("square"));
    }
}
