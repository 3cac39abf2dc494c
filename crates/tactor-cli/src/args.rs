//! Argument errors in one line, printed once per job. clap's own error is three or four lines
//! (the message, a tip, the usage, a pointer to `--help`), and under `mpirun` every rank
//! prints it; a user of a cluster job wants the one line that names the bad value, once.

/// Whether this process is a rank other than 0 of a launcher's job: it stays quiet where every
/// rank would say the same.
pub fn other_rank() -> bool {
    tactor_comm::launcher::job().is_some_and(|(n, r)| n > 1 && r > 0)
}

/// A rank of a launcher's job whose own command line is wrong (`cause`, one line without
/// `error: `) still joins the job to say so, so that every rank ends at once instead of
/// waiting for it: returns what this rank prints after `error: ` — the cause itself from rank
/// 0 when every rank found the same, `rank R: cause` from the rank that alone found it —
/// or `None` where another rank prints. On its own, a process prints its cause.
///
/// ```
/// // Not under a launcher here: the cause, as it is.
/// if tactor_comm::launcher::job().is_none() {
///     assert_eq!(tactor_cli::args::bad_args_line("-x: no such flag").as_deref(), Some("-x: no such flag"));
/// }
/// ```
pub fn bad_args_line(cause: &str) -> Option<String> {
    let Some((_, rank)) = tactor_comm::launcher::job().filter(|&(n, _)| n > 1) else {
        return Some(cause.to_string());
    };
    match crate::signals::silent_unless_ok(|| tactor::job::Job::builder().failed(cause).join()) {
        Err(e) if e.speaks(rank) => Some(e.to_string()),
        _ => None,
    }
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
/// (exit 0); an error is one line on stderr, once per job ([`bad_args_line`]; exit 2). The
/// ranks that do not print wait a moment before exiting, so that a launcher that ends the job
/// at the first exit lets the one that does print.
pub fn parse<P: clap::Parser>() -> P {
    match P::try_parse() {
        Ok(p) => p,
        Err(e) => {
            let mut quiet = other_rank();
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
                    let line = one_line(&e);
                    let cause = line.strip_prefix("error: ").unwrap_or(&line);
                    match bad_args_line(cause) {
                        Some(line) => {
                            crate::say!("error: {line}");
                            quiet = false;
                        }
                        None => quiet = true,
                    }
                    2
                }
            };
            if let Err(f) = crate::output::finish() {
                crate::say!("error: {f}");
                std::process::exit(1);
            }
            if quiet && code != 0 {
                crate::signals::let_another_rank_speak();
            }
            std::process::exit(code)
        }
    }
}
