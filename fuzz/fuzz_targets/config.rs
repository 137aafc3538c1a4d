//! Fuzz target: the config parser and validator, TOML text to `Config`. Any
//! text must give a `Config` or a `ConfigError` (never a panic), the error
//! must render, and a config that validates must write itself out as TOML
//! that parses back to the same `Config` (what `check-config` prints and
//! `/api/v1/config` shows must be a config the daemon would accept).

#![no_main]

use headroom::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::from_toml_str(text, "fuzz.toml") {
        Ok(config) => {
            let written = config.to_toml();
            let again = Config::from_toml_str(&written, "written.toml")
                .unwrap_or_else(|e| panic!("written config does not parse: {e}\n{written}"));
            assert_eq!(again, config, "round trip changed the config:\n{written}");
            let _ = serde_json::to_string(&config);
        }
        Err(e) => {
            let message = e.to_string();
            assert!(message.starts_with("fuzz.toml"), "{message}");
        }
    }
});
