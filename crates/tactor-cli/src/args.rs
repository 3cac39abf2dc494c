//! Argument errors in one line, printed once per job. clap's own error is three or four lines
//! (the message, a tip, the usage, a pointer to `--help`), and under `mpirun` every rank
//! prints it; a user of a cluster job wants the one line that names the bad value, once.

/// Whether this process is a rank other than 0 of a launcher's job: it stays quiet where every
/// rank would say the same.
pub fn other_rank() -> bool {
    tactor_comm::launcher::job().is_some_and(|(n, r)| n > 1 && r > 0)
}

/// The first paragraph of a clap error as one line, `error: ` included: what was wrong and,
/// for a missing argument, which.
///
/// ```
/// use clap::Parser;
/// #[derive(Parser, Debug)]
/// struct A {
///     #[arg(long)]
///     cores: u32,
/// }
/// let e = A::try_parse_from(["prog"]).unwrap_err();
/// assert_eq!(
///     tactor_cli::args::one_line(&e),
///     "error: the following required arguments were not provided: --cores <CORES>"
/// );
/// let e = A::try_parse_from(["prog", "--cores", "x"]).unwrap_err();
/// assert!(tactor_cli::args::one_line(&e).starts_with("error: invalid value 'x' for '--cores <CORES>'"));
/// ```
pub fn one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let first: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let line = first.join(" ");
    if line.starts_with("error:") {
        line
    } else {
        format!("error: {line}")
    }
}

/// Parses this process's arguments as `P`. Help and version go to stdout from rank 0 alone
/// (exit 0); an error is one line on stderr from rank 0 alone (exit 2). The other ranks wait
/// a moment before exiting, so that a launcher that ends the job at the first exit lets rank
/// 0 print.
pub fn parse<P: clap::Parser>() -> P {
    match P::try_parse() {
        Ok(p) => p,
        Err(e) => {
            let quiet = other_rank();
            let code = match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    if !quiet {
                        crate::out!("{}", e.render());
                    }
                    0
                }
                clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    if !quiet {
                        let cmd = P::command();
                        let names: Vec<&str> =
                            cmd.get_subcommands().map(|c| c.get_name()).collect();
                        crate::say!(
                            "error: {} needs one of: {} (--help says more)",
                            cmd.get_name(),
                            names.join(", ")
                        );
                    }
                    2
                }
                _ => {
                    if !quiet {
                        crate::say!("{}", one_line(&e));
                    }
                    2
                }
            };
            if let Err(f) = crate::output::finish() {
                crate::say!("error: {f}");
                std::process::exit(1);
            }
            if quiet && code != 0 {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
            std::process::exit(code)
        }
    }
}
