//! No thread outlives its runtime. Its own test binary, so no other test's threads are counted.

#[cfg(target_os = "linux")]
#[test]
fn dropping_runtimes_joins_every_worker() {
    fn threads() -> usize {
        std::fs::read_dir("/proc/self/task").unwrap().count()
    }
    let before = threads();
    for _ in 0..20 {
        let rt = tactor::Runtime::builder()
            .workers(4)
            .pin(false)
            .build()
            .unwrap();
        assert_eq!(threads(), before + 4);
        let u = tactor::UserEvent::new();
        // Outstanding work of every kind at drop time.
        for i in 0..100 {
            let p = if i % 2 == 0 {
                tactor::Placement::Any
            } else {
                tactor::Placement::Worker(i % 4)
            };
            rt.launch(p, &[u.event()], || ());
            rt.launch(p, &[], || {
                std::thread::sleep(std::time::Duration::from_micros(50))
            });
        }
        drop(rt);
        // A joined thread can stay listed in /proc for a moment after `pthread_join`
        // returns (the kernel reaps it just after waking the joiner): allow it a second.
        let t = std::time::Instant::now();
        while threads() != before && t.elapsed() < std::time::Duration::from_secs(1) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(threads(), before);
        drop(u);
    }
}
