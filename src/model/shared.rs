//! Text that snapshots share instead of copying: a process's name, owner,
//! executable and command line.
//!
//! A sampler reads these once per process identity and hands them out again
//! on every tick while the process lives. Held as plain `String`s, each tick
//! would copy every process's strings into the new snapshot and free the
//! previous snapshot's copies: with 1000 processes, thousands of allocations
//! a second for text that did not change. [`SharedStr`] and [`Argv`] are
//! reference-counted and immutable, so a clone copies a pointer.
//!
//! Both read like the `String` / `Vec<String>` they replace (they deref to
//! `str` / `[String]`, compare with string literals and arrays, print the
//! same `Debug` text) and serialize exactly as those do: a JSON string, a
//! JSON array of strings.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An immutable string whose clones share one allocation.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SharedStr(Arc<str>);

impl SharedStr {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `a` and `b` are clones of one allocation (not only equal).
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// How many clones of this allocation exist, this one included: an
    /// interner drops the strings that only it still holds.
    pub fn holders(&self) -> usize {
        Arc::strong_count(&self.0)
    }
}

impl Deref for SharedStr {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SharedStr {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for SharedStr {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<String> for SharedStr {
    fn from(s: String) -> Self {
        Self(Arc::from(s))
    }
}

impl From<&str> for SharedStr {
    fn from(s: &str) -> Self {
        Self(Arc::from(s))
    }
}

impl From<&String> for SharedStr {
    fn from(s: &String) -> Self {
        Self(Arc::from(s.as_str()))
    }
}

impl From<SharedStr> for String {
    fn from(s: SharedStr) -> Self {
        s.0.to_string()
    }
}

impl PartialEq<str> for SharedStr {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for SharedStr {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for SharedStr {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<SharedStr> for str {
    fn eq(&self, other: &SharedStr) -> bool {
        *self == *other.0
    }
}

impl PartialEq<SharedStr> for &str {
    fn eq(&self, other: &SharedStr) -> bool {
        **self == *other.0
    }
}

impl PartialEq<SharedStr> for String {
    fn eq(&self, other: &SharedStr) -> bool {
        **self == *other.0
    }
}

impl Serialize for SharedStr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SharedStr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::from)
    }
}

/// A command line, immutable, whose clones share one allocation.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Argv(Arc<[String]>);

impl Argv {
    /// Whether `a` and `b` are clones of one allocation (not only equal).
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// How many clones of this allocation exist, this one included: an
    /// interner drops the strings that only it still holds.
    pub fn holders(&self) -> usize {
        Arc::strong_count(&self.0)
    }
}

impl Deref for Argv {
    type Target = [String];
    fn deref(&self) -> &[String] {
        &self.0
    }
}

impl AsRef<[String]> for Argv {
    fn as_ref(&self) -> &[String] {
        &self.0
    }
}

impl fmt::Debug for Argv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl<'a> IntoIterator for &'a Argv {
    type Item = &'a String;
    type IntoIter = std::slice::Iter<'a, String>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl From<Vec<String>> for Argv {
    fn from(v: Vec<String>) -> Self {
        Self(Arc::from(v))
    }
}

impl From<&[String]> for Argv {
    fn from(v: &[String]) -> Self {
        Self(Arc::from(v))
    }
}

impl From<Vec<&str>> for Argv {
    fn from(v: Vec<&str>) -> Self {
        v.into_iter().map(str::to_string).collect()
    }
}

impl<const N: usize> From<[&str; N]> for Argv {
    fn from(v: [&str; N]) -> Self {
        v.into_iter().map(str::to_string).collect()
    }
}

impl FromIterator<String> for Argv {
    fn from_iter<I: IntoIterator<Item = String>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl PartialEq<[String]> for Argv {
    fn eq(&self, other: &[String]) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<Vec<String>> for Argv {
    fn eq(&self, other: &Vec<String>) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<Vec<&str>> for Argv {
    fn eq(&self, other: &Vec<&str>) -> bool {
        self.0.len() == other.len() && self.0.iter().zip(other).all(|(a, b)| a == b)
    }
}

impl<const N: usize> PartialEq<[&str; N]> for Argv {
    fn eq(&self, other: &[&str; N]) -> bool {
        self.0.len() == N && self.0.iter().zip(other).all(|(a, b)| a == b)
    }
}

impl Serialize for Argv {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Argv {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<String>::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_shares_the_text() {
        let a = SharedStr::from("python3");
        let b = a.clone();
        assert!(SharedStr::ptr_eq(&a, &b));
        let argv = Argv::from(["python3", "train.py"]);
        assert!(Argv::ptr_eq(&argv, &argv.clone()));
    }

    #[test]
    fn shared_text_serializes_as_the_string_it_replaces() {
        let text = "a \"quoted\" name\n\u{1b}[31m";
        let shared = serde_json::to_string(&SharedStr::from(text)).expect("encode");
        assert_eq!(shared, serde_json::to_string(text).expect("encode"));
        let back: SharedStr = serde_json::from_str(&shared).expect("decode");
        assert_eq!(back, text);
    }

    #[test]
    fn argv_serializes_as_the_list_it_replaces() {
        let list = vec!["python3".to_string(), "-c".to_string(), "é\0".to_string()];
        let shared = serde_json::to_string(&Argv::from(list.clone())).expect("encode");
        assert_eq!(shared, serde_json::to_string(&list).expect("encode"));
        let back: Argv = serde_json::from_str(&shared).expect("decode");
        assert_eq!(back, list);
        assert_eq!(
            serde_json::to_string(&Argv::default()).expect("encode"),
            "[]"
        );
    }

    #[test]
    fn debug_text_is_the_plain_string_and_list() {
        assert_eq!(format!("{:?}", SharedStr::from("sleep")), "\"sleep\"");
        assert_eq!(
            format!("{:?}", Argv::from(["sleep", "30"])),
            "[\"sleep\", \"30\"]"
        );
    }

    #[test]
    fn compares_with_plain_strings_both_ways() {
        let name = SharedStr::from("sshd");
        let literal: &str = "sshd";
        let owned: String = literal.to_string();
        assert_eq!(name, literal);
        assert_eq!(literal, name);
        assert!(PartialEq::<str>::eq(&name, literal));
        assert_eq!(name, owned);
        assert_eq!(owned, name);
        assert_ne!(name, "sshd-session");
        let argv = Argv::from(["sleep", "30"]);
        assert!(argv == ["sleep", "30"] && argv != ["sleep"]);
        assert!(argv == vec!["sleep", "30"]);
    }
}
