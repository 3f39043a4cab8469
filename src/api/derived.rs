//! A value a struct derives from its own fields, computed on first use and then kept: the forms of
//! a SidecarSet's containers that every injection would otherwise rebuild. SidecarSets are decoded
//! once and then shared read-only (`Arc`) by every request, so the first request that needs the
//! value pays for it and the others read it.
//!
//! It is not part of the value it sits in: it is never serialised, compares equal whatever it
//! holds, and a clone starts empty (the clone's fields may be changed before it is used, so it
//! derives its own). Only `&self` fills it, so nothing can change the fields it was derived from
//! once it is filled except code holding `&mut` — none does after decoding.

use std::fmt;
use std::sync::OnceLock;

pub struct Derived<T>(OnceLock<T>);

impl<T> Derived<T> {
    /// The value, computed by `derive` the first time.
    pub fn get_or_init(&self, derive: impl FnOnce() -> T) -> &T {
        self.0.get_or_init(derive)
    }
}

impl<T> Default for Derived<T> {
    fn default() -> Self {
        Derived(OnceLock::new())
    }
}

impl<T> Clone for Derived<T> {
    fn clone(&self) -> Self {
        Derived::default()
    }
}

impl<T> PartialEq for Derived<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> fmt::Debug for Derived<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.get().is_some() { "Derived(filled)" } else { "Derived(empty)" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn computed_once_and_left_out_of_clones_and_equality() {
        let d = Derived::default();
        assert_eq!(*d.get_or_init(|| 1), 1);
        assert_eq!(*d.get_or_init(|| 2), 1);
        let copy = d.clone();
        assert_eq!(*copy.get_or_init(|| 3), 3);
        assert_eq!(d, copy);
        assert_eq!(format!("{:?}", Derived::<u8>::default()), "Derived(empty)");
    }
}
