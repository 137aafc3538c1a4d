//! stub
pub struct SysinfoSampler;
impl SysinfoSampler {
    pub fn new() -> Self {
        Self
    }
}
impl super::Sampler for SysinfoSampler {
    fn name(&self) -> &'static str {
        "sysinfo"
    }
    fn sample(&mut self) -> Result<crate::model::Snapshot, super::SampleError> {
        todo!()
    }
}
