//! GPU memory: who holds it, composed onto the OS sampler.
//!
//! A [`GpuCollector`] reads devices and their process lists (NVML on Linux:
//! `os::linux::nvml`; a hand-set list in tests: [`fake`]). [`WithGpu`] wraps any
//! [`Sampler`]: it takes the inner sample, polls the collector through a
//! [`GpuMonitor`] (open once, report "unavailable" once, retry every few
//! minutes, never fail the sample), and joins the devices into the snapshot
//! ([`join`]): `Snapshot::gpus`, `ProcessSample::gpu_memory`, a line of
//! evidence per device in the process's workload. As a [`Collector`] it
//! reports the last poll's health (`Snapshot::collectors`) and its
//! `headroom doctor` check.
//!
//! [`probe`] checks the collector once with given settings.

pub mod fake;
pub mod join;
pub mod monitor;
pub mod pid_namespace;

use std::path::Path;
use std::time::{Duration, Instant};

use crate::config::GpuConfig;
use crate::model::{Check, Collector, CollectorStatus, Snapshot};
use crate::sample::{SampleError, Sampler};

pub use monitor::{GpuMonitor, LogLevel, LogLine, Poll, RETRY_AFTER};
pub use pid_namespace::PidView;

pub use crate::model::gpu_source::{DeviceReading, GpuCollector, GpuError, RawGpuProcess};

/// An OS sampler with GPU figures joined in.
pub struct WithGpu<S> {
    inner: S,
    monitor: GpuMonitor,
    view: PidView,
    health: Health,
}

/// The GPU collector as a [`Collector`]: how its last poll went.
struct Health {
    name: &'static str,
    /// `None` before the first poll.
    last: Option<CollectorStatus>,
    /// Why the driver's pids are not this namespace's, where they are not.
    other_namespace: Option<String>,
}

impl<S: Sampler> WithGpu<S> {
    /// `view` says whether the collector's pids are this pid namespace's
    /// ([`pid_namespace::detect`] finds out).
    pub fn new(inner: S, collector: Box<dyn GpuCollector>, view: PidView) -> Self {
        let monitor = GpuMonitor::new(collector);
        let health = Health {
            name: monitor.name(),
            last: None,
            other_namespace: match &view {
                PidView::Container { why } => Some(why.clone()),
                PidView::Host => None,
            },
        };
        Self {
            inner,
            monitor,
            view,
            health,
        }
    }

    /// Try a collector that is down again after `retry_after` instead of
    /// [`RETRY_AFTER`].
    pub fn with_retry_after(mut self, retry_after: Duration) -> Self {
        self.monitor = self.monitor.with_retry_after(retry_after);
        self
    }

    /// The wrapped sampler.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: Sampler> Sampler for WithGpu<S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn sample(&mut self) -> Result<Snapshot, SampleError> {
        let snap = self.inner.sample()?;
        Ok(self.join_gpus(snap))
    }

    fn sample_light(&mut self, watched: &[u32]) -> Result<Snapshot, SampleError> {
        let snap = self.inner.sample_light(watched)?;
        Ok(self.join_gpus(snap))
    }

    fn sample_unless(
        &mut self,
        watched: &[u32],
        trip: &crate::model::sampling::Tripwire,
    ) -> Result<(Snapshot, bool), SampleError> {
        let (snap, full) = self.inner.sample_unless(watched, trip)?;
        Ok((self.join_gpus(snap), full))
    }

    fn collectors(&self) -> Vec<&dyn Collector> {
        let mut sources = self.inner.collectors();
        sources.push(&self.health);
        sources
    }
}

impl Collector for Health {
    fn name(&self) -> &'static str {
        self.name
    }

    fn status(&self) -> Option<CollectorStatus> {
        self.last.clone()
    }

    /// What the last poll found, with whether the driver's pids can be
    /// matched to processes here, in the words of [`check_of`].
    fn doctor_check(&self) -> Option<Check> {
        let mut status = self.last.clone()?;
        if status.up
            && let Some(why) = &self.other_namespace
        {
            status.detail.push_str(&container_note(why));
        }
        Some(check_of(&status))
    }
}

impl<S: Sampler> WithGpu<S> {
    /// Poll the GPU collector and join its figures into `snap`.
    fn join_gpus(&mut self, mut snap: Snapshot) -> Snapshot {
        let started = Instant::now();
        let poll = self.monitor.poll(started);
        for line in &poll.log {
            match line.level {
                LogLevel::Info => tracing::info!("{}", line.message),
                LogLevel::Warn => tracing::warn!("{}", line.message),
            }
        }
        let devices = poll.devices.iter().map(join::device).collect();
        join::join(&mut snap, devices, &self.view);
        self.health.last = Some(poll.status);
        let spent = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        snap.sample_micros = snap.sample_micros.saturating_add(spent);
        snap
    }
}

/// The GPU collector this build uses on this OS, if the settings want one:
/// NVML on Linux.
pub fn platform_collector(settings: &GpuConfig) -> Option<Box<dyn GpuCollector>> {
    if !settings.nvml {
        return None;
    }
    crate::os::native::gpu_collector(settings.nvml_library.clone())
}

/// Wraps `inner` with the platform's GPU collector, or returns it as it is
/// when the settings or the OS want none.
pub fn wrap<S: Sampler + 'static>(inner: S, settings: &GpuConfig) -> Box<dyn Sampler> {
    match platform_collector(settings) {
        Some(collector) => {
            let view = pid_namespace::detect(Path::new("/proc"), Path::new("/"));
            Box::new(WithGpu::new(inner, collector, view))
        }
        None => Box::new(inner),
    }
}

/// Checks the GPU collector once, as `headroom doctor` does: whether it
/// opens and reads, what it found, and whether its pids can be matched to
/// processes here.
pub fn probe(settings: &GpuConfig) -> CollectorStatus {
    let Some(collector) = platform_collector(settings) else {
        let detail = if settings.nvml {
            "NVML is read on Linux only"
        } else {
            "turned off in the config ([gpu] nvml = false)"
        };
        return CollectorStatus {
            name: "nvml".to_string(),
            up: false,
            detail: detail.to_string(),
            errors: 0,
            applicable: false,
        };
    };
    let mut status = GpuMonitor::new(collector).poll(Instant::now()).status;
    if status.up
        && let PidView::Container { why } =
            pid_namespace::detect(Path::new("/proc"), Path::new("/"))
    {
        status.detail.push_str(&container_note(&why));
    }
    status
}

/// What a status says where the driver's pids are another namespace's.
fn container_note(why: &str) -> String {
    format!(
        "; headroom runs in another pid namespace ({why}): GPU processes cannot be \
         matched to processes"
    )
}

/// The `gpu` line of `headroom doctor` for a status of the GPU collector.
fn check_of(status: &CollectorStatus) -> Check {
    let static_build = status
        .detail
        .starts_with(crate::model::gpu_source::STATIC_BUILD_NOTE);
    if status.up {
        Check::ok("gpu", format!("NVML: {}", status.detail))
    } else if static_build && status.applicable {
        // The driver is loaded, but this build cannot load its library.
        Check::warn(
            "gpu",
            format!("NVML: {}", status.detail),
            "GPU memory needs a dynamically linked headroom: the .deb, the container image \
             or a build from source",
        )
    } else if static_build || status.detail.contains("not found") {
        Check::not_applicable(
            "gpu",
            format!("NVML: {} — GPU memory is not reported", status.detail),
        )
    } else {
        Check::warn(
            "gpu",
            format!("NVML: {}", status.detail),
            "check the NVIDIA driver with nvidia-smi; set [gpu] nvml_library if the library \
             is somewhere the loader does not look",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::fake::{FakeGpu, device, process};
    use super::*;
    use crate::sample::replay::ReplaySampler;

    const GIB: u64 = 1 << 30;

    fn trace() -> ReplaySampler {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/traces/growth-linux-6.18.jsonl");
        ReplaySampler::open(&path).unwrap()
    }

    #[test]
    fn with_gpu_joins_a_fake_device_into_the_inner_sample() {
        let mut inner = trace();
        let first = inner.sample().unwrap();
        let pid = first.by_footprint()[0].id.pid;

        let fake = FakeGpu::new();
        let mut d = device(0, "NVIDIA H100 80GB HBM3", 80 * GIB, 9 * GIB);
        d.compute = vec![process(pid, Some(8 * GIB))];
        fake.set_devices(vec![d]);
        let mut s = WithGpu::new(trace(), Box::new(fake.clone()), PidView::Host);
        let snap = s.sample().unwrap();

        assert_eq!(snap.gpus.len(), 1);
        assert_eq!(snap.gpus[0].processes[0].pid, pid);
        assert!(snap.gpus[0].processes[0].joined);
        let p = snap.process(pid).unwrap();
        assert_eq!(p.gpu_memory, Some(8 * GIB));
        assert!(
            p.workload
                .evidence
                .contains(&"holds 8.0 GiB of GPU memory on GPU 0".to_string())
        );
        let statuses = crate::model::collector::gather(&s.collectors());
        assert_eq!(statuses.len(), 1);
        assert_eq!(statuses[0].name, "fake");
        assert!(statuses[0].up);
        assert_eq!(s.name(), "replay");
    }

    #[test]
    fn evidence_does_not_pile_up_from_tick_to_tick() {
        let pid = trace().sample().unwrap().by_footprint()[0].id.pid;
        let fake = FakeGpu::new();
        let mut d = device(0, "GPU", 80 * GIB, 9 * GIB);
        d.compute = vec![process(pid, Some(GIB))];
        fake.set_devices(vec![d]);
        let mut s = WithGpu::new(trace(), Box::new(fake), PidView::Host);
        let first = s.sample().unwrap();
        let second = s.sample().unwrap();
        let n = |snap: &Snapshot| {
            snap.process(pid)
                .map(|p| p.workload.evidence.len())
                .unwrap_or_default()
        };
        assert_eq!(n(&first), n(&second));
        assert_eq!(crate::model::collector::gather(&s.collectors()).len(), 1);
    }

    #[test]
    fn a_collector_that_will_not_open_leaves_the_sample_whole() {
        let fake = FakeGpu::new();
        fake.fail_open(Some(GpuError {
            message: "libnvidia-ml.so.1 not found (no NVIDIA driver)".into(),
            no_driver: true,
        }));
        let mut s = WithGpu::new(trace(), Box::new(fake.clone()), PidView::Host);
        let mut plain = trace();
        for _ in 0..3 {
            let snap = s.sample().unwrap();
            let plain = plain.sample().unwrap();
            assert_eq!(snap.processes, plain.processes);
            assert!(snap.gpus.is_empty());
            let statuses = crate::model::collector::gather(&s.collectors());
            assert_eq!(statuses.len(), 1);
            assert!(!statuses[0].up);
            assert_eq!(
                statuses[0].detail,
                "libnvidia-ml.so.1 not found (no NVIDIA driver)"
            );
        }
        assert_eq!(fake.opens(), 1);
    }

    #[test]
    fn probe_of_a_disabled_collector_says_so() {
        let status = probe(&GpuConfig {
            nvml: false,
            nvml_library: None,
        });
        assert!(!status.up);
        assert_eq!(status.name, "nvml");
        assert!(status.detail.contains("nvml = false"), "{}", status.detail);
    }

    #[test]
    fn a_disabled_collector_leaves_the_sampler_unwrapped() {
        let settings = GpuConfig {
            nvml: false,
            nvml_library: None,
        };
        assert!(platform_collector(&settings).is_none());
        let mut s = wrap(trace(), &settings);
        assert!(s.sample().unwrap().collectors.is_empty());
        assert!(s.collectors().is_empty());
    }
}
