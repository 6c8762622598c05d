//! Compact parts of a [`super::CellSummary`]: names shared between cells and small sorted maps.
//!
//! A report holds one summary per cell (src/report/model.rs), so a summary's size is the
//! report's per-cell memory. Most of a summary's text repeats from cell to cell (the run id,
//! profile, provider, model, agent digest, case, category, stop reason, tool and event kind
//! names), and its counts are maps of a dozen entries, which a `BTreeMap<String, _>` stores in
//! nodes of eleven slots with one allocation per key (about 2 KB for a typical cell's event and
//! tool counts). Here a repeated text is a [`Name`], one reference-counted string that
//! [`Names`] lets every cell share, and a map is a [`Tally`], a sorted vector of its entries.
//! Both serialize exactly as the `String` and `BTreeMap` they replace, so results lines and
//! reports are byte for byte what they were.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A text that repeats across cells: a string that clones by reference. Reads as a `&str`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(Arc<str>);

impl Name {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The empty name, made once per process: an `Arc<str>` allocates even when empty, and a
/// summary starts with a dozen empty names (one allocation each per replayed trace before).
impl Default for Name {
    fn default() -> Self {
        static EMPTY: std::sync::LazyLock<Name> = std::sync::LazyLock::new(|| Name(Arc::from("")));
        EMPTY.clone()
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Self {
        if s.is_empty() {
            return Name::default();
        }
        Name(Arc::from(s))
    }
}

impl From<String> for Name {
    fn from(s: String) -> Self {
        Name(Arc::from(s))
    }
}

impl From<&String> for Name {
    fn from(s: &String) -> Self {
        Name(Arc::from(s.as_str()))
    }
}

impl From<Name> for String {
    fn from(n: Name) -> Self {
        n.0.to_string()
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        &*self.0 == other.as_str()
    }
}

impl PartialEq<Name> for str {
    fn eq(&self, other: &Name) -> bool {
        self == &*other.0
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        *self == &*other.0
    }
}

impl PartialEq<Name> for String {
    fn eq(&self, other: &Name) -> bool {
        self.as_str() == &*other.0
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// Builds the name from the text where it lies when the deserializer lends it (one
        /// allocation, where a `String` first takes two).
        struct NameVisitor;
        impl serde::de::Visitor<'_> for NameVisitor {
            type Value = Name;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Name, E> {
                Ok(Name::from(s))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Name, E> {
                Ok(Name::from(s))
            }
        }
        deserializer.deserialize_str(NameVisitor)
    }
}

/// A small map from names to values, its entries sorted by name: what a `BTreeMap` gives, in
/// one allocation sized to the entries. Serializes as a JSON object in name order, as the
/// `BTreeMap` it replaces did.
#[derive(Clone, PartialEq)]
pub struct Tally<V>(Vec<(Name, V)>);

impl<V: fmt::Debug> fmt::Debug for Tally<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V> Default for Tally<V> {
    fn default() -> Self {
        Tally(Vec::new())
    }
}

impl<V> Tally<V> {
    /// The tally of `entries`, which must be in name order with no name twice.
    pub fn from_sorted(entries: Vec<(Name, V)>) -> Self {
        debug_assert!(entries.windows(2).all(|w| w[0].0.as_str() < w[1].0.as_str()), "names in order, once each");
        Tally(entries)
    }

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(name))
    }

    pub fn get(&self, name: &str) -> Option<&V> {
        self.position(name).ok().map(|i| &self.0[i].1)
    }

    /// The value of `name`, added with `V::default()` when missing.
    pub fn entry(&mut self, name: &str) -> &mut V
    where
        V: Default,
    {
        let i = match self.position(name) {
            Ok(i) => i,
            Err(i) => {
                self.0.insert(i, (Name::from(name), V::default()));
                i
            }
        };
        &mut self.0[i].1
    }

    /// Sets `name` to `value`, replacing what it had.
    pub fn insert(&mut self, name: impl Into<Name> + AsRef<str>, value: V) {
        match self.position(name.as_ref()) {
            Ok(i) => self.0[i].1 = value,
            Err(i) => self.0.insert(i, (name.into(), value)),
        }
    }

    pub fn remove(&mut self, name: &str) -> Option<V> {
        self.position(name).ok().map(|i| self.0.remove(i).1)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The entries in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_str())
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }
}

impl<V> std::ops::Index<&str> for Tally<V> {
    type Output = V;
    fn index(&self, name: &str) -> &V {
        self.get(name).unwrap_or_else(|| panic!("no entry `{name}`"))
    }
}

impl<K: Into<Name> + AsRef<str>, V> Extend<(K, V)> for Tally<V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, entries: I) {
        for (k, v) in entries {
            self.insert(k, v);
        }
    }
}

impl<V> From<BTreeMap<String, V>> for Tally<V> {
    fn from(map: BTreeMap<String, V>) -> Self {
        // Already in name order: `String` and `str` order alike.
        Tally(map.into_iter().map(|(k, v)| (Name::from(k), v)).collect())
    }
}

impl<'a, V> IntoIterator for &'a Tally<V> {
    type Item = (&'a str, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (Name, V)>, fn(&'a (Name, V)) -> (&'a str, &'a V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }
}

impl<V: Serialize> Serialize for Tally<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (k.as_str(), v)))
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Tally<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Through a `BTreeMap`, so order and repeated keys (the last wins) are as before.
        BTreeMap::<String, V>::deserialize(deserializer).map(Tally::from)
    }
}

/// The names seen so far, so that equal names share one string. A report keeps one while it
/// collects its summaries ([`super::CellSummary::share_names`]); dropping it frees nothing the
/// summaries still use.
#[derive(Debug, Default)]
pub struct Names(HashSet<Arc<str>>);

impl Names {
    /// Makes `name` the shared copy of its text, first seen here or earlier.
    pub fn share(&mut self, name: &mut Name) {
        match self.0.get(&*name.0) {
            Some(seen) => name.0 = Arc::clone(seen),
            None => {
                self.0.insert(Arc::clone(&name.0));
            }
        }
    }

    /// Shares a tally's names and drops its spare capacity.
    pub fn share_keys<V>(&mut self, tally: &mut Tally<V>) {
        for (k, _) in &mut tally.0 {
            self.share(k);
        }
        tally.0.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_reads_and_writes_as_the_map_it_replaces() {
        let text = r#"{"run_tests":1,"edit_file":2,"read_file":3}"#;
        let map: BTreeMap<String, u32> = serde_json::from_str(text).unwrap();
        let mut tally: Tally<u32> = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&tally).unwrap(), serde_json::to_string(&map).unwrap());
        *tally.entry("finish") += 1;
        *tally.entry("edit_file") += 1;
        tally.insert("a_first", 9);
        assert_eq!(tally.keys().collect::<Vec<_>>(), ["a_first", "edit_file", "finish", "read_file", "run_tests"]);
        assert_eq!((tally["edit_file"], tally.get("finish"), tally.get("none")), (3, Some(&1), None));
        assert_eq!(tally.remove("a_first"), Some(9));
        assert_eq!(serde_json::to_string(&tally).unwrap(), r#"{"edit_file":3,"finish":1,"read_file":3,"run_tests":1}"#);
    }

    #[test]
    fn equal_names_share_one_string() {
        let mut names = Names::default();
        let (mut a, mut b) = (Name::from("oracle"), Name::from(String::from("oracle")));
        assert!(!Arc::ptr_eq(&a.0, &b.0));
        names.share(&mut a);
        names.share(&mut b);
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert_eq!((a == "oracle", serde_json::to_string(&a).unwrap()), (true, r#""oracle""#.to_string()));
    }
}
