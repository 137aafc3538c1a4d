//! Configuration: the TOML file and the units written in it.

pub mod units;

pub use units::{
    ByteSize, HumanDuration, Rate, SizeLimit, UnitError, format_duration, parse_duration,
    parse_rate, parse_size, parse_size_limit,
};
