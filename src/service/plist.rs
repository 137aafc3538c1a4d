//! A small XML property-list emitter: strings, booleans, integers, arrays
//! and dictionaries, what headroom's plists use, in the format `plutil
//! -lint` accepts.

use std::fmt::Write as _;

/// A property-list value of the kinds the plists use.
#[derive(Debug, Clone, PartialEq)]
pub enum PlistValue {
    String(String),
    Bool(bool),
    Integer(i64),
    Array(Vec<PlistValue>),
    Dict(Vec<(String, PlistValue)>),
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
    out
}

fn write_plist_value(out: &mut String, v: &PlistValue, depth: usize) {
    let pad = "\t".repeat(depth);
    match v {
        PlistValue::String(s) => {
            let _ = writeln!(out, "{pad}<string>{}</string>", xml_escape(s));
        }
        PlistValue::Bool(b) => {
            let _ = writeln!(out, "{pad}<{b}/>");
        }
        PlistValue::Integer(n) => {
            let _ = writeln!(out, "{pad}<integer>{n}</integer>");
        }
        PlistValue::Array(items) => {
            let _ = writeln!(out, "{pad}<array>");
            for item in items {
                write_plist_value(out, item, depth + 1);
            }
            let _ = writeln!(out, "{pad}</array>");
        }
        PlistValue::Dict(entries) => {
            let _ = writeln!(out, "{pad}<dict>");
            for (k, item) in entries {
                let _ = writeln!(out, "{pad}\t<key>{}</key>", xml_escape(k));
                write_plist_value(out, item, depth + 1);
            }
            let _ = writeln!(out, "{pad}</dict>");
        }
    }
}

/// An XML property list (the format `plutil -lint` accepts) of a top-level
/// dictionary.
pub fn render_plist(dict: Vec<(String, PlistValue)>) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <plist version=\"1.0\">\n",
    );
    write_plist_value(&mut out, &PlistValue::Dict(dict), 0);
    out.push_str("</plist>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::parse_plist;

    #[test]
    fn the_emitter_escapes_what_xml_needs() {
        let text = render_plist(vec![
            ("A&B".into(), PlistValue::String("<x> & \"y\" 'z'".into())),
            ("N".into(), PlistValue::Integer(-3)),
            (
                "L".into(),
                PlistValue::Array(vec![PlistValue::Bool(true), PlistValue::Bool(false)]),
            ),
        ]);
        let d = parse_plist(&text);
        assert_eq!(
            d.get("A&B").and_then(|v| v.as_string()),
            Some("<x> & \"y\" 'z'")
        );
        assert_eq!(d.get("N").and_then(|v| v.as_signed_integer()), Some(-3));
        let l = d.get("L").and_then(|v| v.as_array()).unwrap();
        assert_eq!(l[0].as_boolean(), Some(true));
        assert_eq!(l[1].as_boolean(), Some(false));
    }
}
