//! stub
pub struct LinuxSampler;
impl LinuxSampler {
    pub fn new(_root: impl Into<std::path::PathBuf>) -> Self {
        Self
    }
}
impl super::Sampler for LinuxSampler {
    fn name(&self) -> &'static str {
        "linux"
    }
    fn sample(&mut self) -> Result<crate::model::Snapshot, super::SampleError> {
        todo!()
    }
}
