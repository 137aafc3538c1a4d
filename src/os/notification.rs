//! A desktop notification, the same on every OS: the [`Message`], its
//! [`Audience`], and the arguments of each OS's notifier, built so that the
//! text is data and never an option or code: `notify-send` on Linux
//! ([`notify_send_args`]) and `osascript` on macOS ([`osascript_args`]).
//! Pure, so that both are tested everywhere; `os::<os>::notify` builds the
//! command.

use crate::report::printable;

/// The message to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub title: String,
    pub body: String,
}

/// Who the notification is for and who is sending it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Audience {
    /// The uid owning the process the notification is about.
    pub target_uid: Option<u32>,
    /// headroom's effective uid.
    pub own_uid: u32,
}

/// `notify-send` arguments: the app name, urgency, title and body. The
/// title and body follow `--`, so a body starting with `-` is not an option.
/// Control characters are escaped in both, and the body's markup characters
/// are turned into entities (the notification server reads the body as
/// markup, the title as plain text).
pub fn notify_send_args(message: &Message) -> Vec<String> {
    vec![
        "--app-name=headroom".into(),
        "--urgency=critical".into(),
        "--".into(),
        printable(&message.title).into_owned(),
        markup_escape(&printable(&message.body)),
    ]
}

/// `&`, `<` and `>` as entities, for the body markup of the Desktop
/// Notifications Specification (a subset of HTML).
pub fn markup_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// The AppleScript `osascript` runs, fixed: it shows its arguments. The
/// first argument is [`APPLE_ARGV0`], so that `osascript`'s option parser,
/// which stops at the first argument that is not an option, never reads a
/// title or body that starts with `-` as an option of its own.
pub const APPLE_SCRIPT: [&str; 3] = [
    "on run argv",
    "display notification (item 3 of argv) with title (item 2 of argv)",
    "end run",
];

/// See [`APPLE_SCRIPT`].
pub const APPLE_ARGV0: &str = "headroom";

/// `osascript` arguments: the script's lines (each after `-e`), then
/// [`APPLE_ARGV0`], the title and the body, with control characters
/// escaped. The text is data to the script, never part of it.
pub fn osascript_args(message: &Message) -> Vec<String> {
    let mut args = Vec::with_capacity(9);
    for line in APPLE_SCRIPT {
        args.push("-e".to_string());
        args.push(line.to_string());
    }
    args.push(APPLE_ARGV0.to_string());
    args.push(printable(&message.title).into_owned());
    args.push(printable(&message.body).into_owned());
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message() -> Message {
        Message {
            title: "headroom: notebook-runaway".into(),
            body: "-python3 (pid 4) \"big\"\\".into(),
        }
    }

    const HOSTILE: &str = "\u{1b}[31mRED\n\u{7}<b>";

    fn hostile() -> Message {
        Message {
            title: format!("headroom: {HOSTILE}"),
            body: format!("{HOSTILE} (pid 4): footprint & growth"),
        }
    }

    fn no_control_characters(args: &[String]) {
        for a in args {
            assert!(!a.chars().any(char::is_control), "{a:?}");
        }
    }

    #[test]
    fn notify_send_takes_title_and_body_after_the_options() {
        let args = notify_send_args(&message());
        assert_eq!(args[2], "--");
        assert_eq!(args[3], "headroom: notebook-runaway");
        assert_eq!(args[4], "-python3 (pid 4) \"big\"\\");
    }

    #[test]
    fn notify_send_gets_no_markup_and_no_control_characters() {
        let args = notify_send_args(&hostile());
        no_control_characters(&args);
        assert_eq!(args[3], "headroom: \\u{1b}[31mRED\\n\\u{7}<b>");
        assert_eq!(
            args[4],
            "\\u{1b}[31mRED\\n\\u{7}&lt;b&gt; (pid 4): footprint &amp; growth"
        );
    }

    #[test]
    fn the_apple_script_is_fixed_and_the_text_comes_as_arguments() {
        let args = osascript_args(&hostile());
        no_control_characters(&args);
        // The script: three -e lines that are the same whatever the text.
        let script: Vec<&str> = args.chunks(2).take(3).map(|p| p[1].as_str()).collect();
        assert!(args.chunks(2).take(3).all(|p| p[0] == "-e"));
        assert_eq!(script, APPLE_SCRIPT);
        assert_eq!(
            &args[6..],
            [
                APPLE_ARGV0.to_string(),
                "headroom: \\u{1b}[31mRED\\n\\u{7}<b>".to_string(),
                "\\u{1b}[31mRED\\n\\u{7}<b> (pid 4): footprint & growth".to_string(),
            ]
        );
        // A quote in the text stays data.
        let quoted = osascript_args(&Message {
            title: "t".into(),
            body: "\" & (do shell script \"id\") & \"".into(),
        });
        assert_eq!(quoted[8], "\" & (do shell script \"id\") & \"");
        assert!(quoted[..6].iter().all(|a| !a.contains("shell")));
    }
}
