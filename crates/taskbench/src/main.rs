// Task runtimes allocate per task and free on another core; glibc's allocator serialises those
// cross-thread frees on arena locks. mimalloc doubled Tactor's task throughput here (see
// `crates/tactor/examples/throughput.rs`), and it changes nothing for the systems that do not
// allocate per task. (Miri cannot run its C code: there the system allocator stays.)
#[cfg(not(miri))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    taskbench::cli::main()
}
