//! What the NVML collector costs per sample, in CPU time of the whole
//! process (`clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`: user + system, all
//! threads, NVML's own included), on this machine, GPU or not.
//!
//! Rows:
//! - **open**: loading `libnvidia-ml` and `nvmlInit` plus device discovery,
//!   once (a failed `dlopen` on a machine without the driver).
//! - **read** (with a driver): one `NvmlCollector::read()`, every device's
//!   memory, utilisation and compute and graphics process lists. Timed in
//!   batches of 10 calls, per call.
//! - **poll, down** (without a driver): one `GpuMonitor::poll()` of a
//!   collector that could not be opened, which is all a tick costs there.
//! - **sample** and **sample + gpu**: `LinuxSampler::sample()` alone and
//!   wrapped in `WithGpu` with the NVML collector, interleaved; the
//!   difference of the medians is what the GPU adds to a tick, join included.
//!
//! Run: `cargo bench --bench gpu_cost`. `HEADROOM_GPU_BENCH_CALLS` changes
//! the 1000 reads (or polls), `HEADROOM_GPU_BENCH_SAMPLES` the 50 sampler
//! passes; `HEADROOM_NVML_LIBRARY` names a library to try first, as
//! `[gpu] nvml_library` does. `scripts/gpu-check.sh` runs it on a machine
//! with an NVIDIA GPU while a process holds 8 GiB on it.

mod common;

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("gpu_cost measures the NVML collector, read on Linux only; nothing to do here");
}

#[cfg(target_os = "linux")]
mod linux {
    use crate::common::{cpu_time, env_usize, quantile};
    use std::hint::black_box;
    use std::path::PathBuf;
    use std::time::Instant;

    use headroom::os::linux::LinuxSampler;
    use headroom::os::linux::nvml::NvmlCollector;
    use headroom::sample::Sampler;
    use headroom::sample::gpu::{GpuCollector, GpuMonitor, WithGpu, pid_namespace};

    /// Calls per timed batch, so the clock's own cost (a system call for
    /// this clock) stays small next to what is measured.
    const BATCH: usize = 10;

    /// CPU and wall µs per call of `f`, one entry per batch of `BATCH` calls.
    fn per_call(rounds: usize, mut f: impl FnMut()) -> (Vec<f64>, Vec<f64>) {
        let (mut cpu, mut wall) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let (c0, w0) = (cpu_time(), Instant::now());
            for _ in 0..BATCH {
                f();
            }
            let (c1, w1) = (cpu_time(), Instant::now());
            cpu.push(c1.saturating_sub(c0).as_secs_f64() * 1e6 / BATCH as f64);
            wall.push(w1.duration_since(w0).as_secs_f64() * 1e6 / BATCH as f64);
        }
        (cpu, wall)
    }

    /// One table row; `wall` may be empty (not measured).
    fn row(name: &str, what: &str, cpu: &[f64], wall: &[f64]) {
        let wall = if wall.is_empty() {
            "-".to_string()
        } else {
            format!("{:.2}", quantile(wall, 0.5))
        };
        println!(
            "| {name:<12} | {what:<44} | {:>10.2} | {:>10.2} | {wall:>10} |",
            quantile(cpu, 0.5),
            quantile(cpu, 0.9),
        );
    }

    pub fn main() {
        let calls = env_usize("HEADROOM_GPU_BENCH_CALLS", 1000).max(BATCH);
        let samples = env_usize("HEADROOM_GPU_BENCH_SAMPLES", 50).max(1);
        let configured = std::env::var_os("HEADROOM_NVML_LIBRARY").map(PathBuf::from);

        let mut collector = NvmlCollector::new(configured.clone());
        let (c0, w0) = (cpu_time(), Instant::now());
        let opened = collector.open();
        let open_cpu = cpu_time().saturating_sub(c0).as_secs_f64() * 1e6;
        let open_wall = w0.elapsed().as_secs_f64() * 1e6;

        println!("gpu_cost: NVML collector, CPU time of the whole process");
        match &opened {
            Ok(()) => println!("nvml: up: {}", collector.describe()),
            Err(e) => println!("nvml: down: {e}"),
        }
        let mut listed = Vec::new();
        if opened.is_ok() {
            match collector.read() {
                Ok(devices) => {
                    for d in &devices {
                        let used = d.memory_used.map_or("?".into(), |b| format!("{b} B"));
                        listed.push(format!(
                            "GPU {} {}: {used} used, {} compute and {} graphics entries{}",
                            d.index,
                            d.name,
                            d.compute.len(),
                            d.graphics.len(),
                            if d.problems.is_empty() {
                                String::new()
                            } else {
                                format!(", problems: {}", d.problems.join("; "))
                            }
                        ));
                    }
                }
                Err(e) => listed.push(format!("first read failed: {e}")),
            }
        }
        for l in &listed {
            println!("  {l}");
        }
        println!();
        println!(
            "| {:<12} | {:<44} | {:>10} | {:>10} | {:>10} |",
            "row", "what", "CPU µs", "p90 µs", "wall µs"
        );
        println!(
            "|{:-<14}|{:-<46}|{:->12}|{:->12}|{:->12}|",
            "", "", "", "", ""
        );
        row(
            "open",
            "dlopen + nvmlInit + devices, once",
            &[open_cpu],
            &[open_wall],
        );

        let rounds = calls / BATCH;
        if opened.is_ok() {
            let (cpu, wall) = per_call(rounds, || {
                black_box(collector.read().ok());
            });
            row("read", "NvmlCollector::read(), per call", &cpu, &wall);
        } else {
            let mut down = NvmlCollector::new(configured.clone());
            // The first poll tries to open (and fails); later ones are the
            // steady state of a machine without a driver.
            let mut monitor = GpuMonitor::new(Box::new(NvmlCollector::new(configured.clone())));
            monitor.poll(Instant::now());
            let (cpu, wall) = per_call(rounds, || {
                black_box(monitor.poll(Instant::now()));
            });
            row(
                "poll, down",
                "GpuMonitor::poll() without a driver",
                &cpu,
                &wall,
            );
            let (cpu, wall) = per_call(rounds.min(20), || {
                black_box(down.open().is_err());
            });
            row("retry", "a failed open (every 5 minutes)", &cpu, &wall);
        }

        // The whole tick, interleaved so drift hits both alike.
        let view = pid_namespace::detect(std::path::Path::new("/proc"), std::path::Path::new("/"));
        let mut plain = LinuxSampler::new("/proc");
        let mut with_gpu = WithGpu::new(
            LinuxSampler::new("/proc"),
            Box::new(NvmlCollector::new(configured)),
            view.clone(),
        );
        for _ in 0..5 {
            plain.sample().expect("sample");
            with_gpu.sample().expect("sample");
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut processes = 0;
        for _ in 0..samples {
            let t0 = cpu_time();
            processes = black_box(plain.sample().expect("sample")).processes.len();
            let t1 = cpu_time();
            black_box(with_gpu.sample().expect("sample"));
            let t2 = cpu_time();
            a.push(t1.saturating_sub(t0).as_secs_f64() * 1e6);
            b.push(t2.saturating_sub(t1).as_secs_f64() * 1e6);
        }
        row("sample", "LinuxSampler::sample()", &a, &[]);
        row("sample + gpu", "WithGpu<LinuxSampler>::sample()", &b, &[]);
        println!();
        println!(
            "GPU share of a tick: {:+.1} µs CPU (median of sample + gpu − median of sample), \
             {processes} processes sampled, {samples} passes, pid view {view:?}",
            quantile(&b, 0.5) - quantile(&a, 0.5)
        );
    }
}
