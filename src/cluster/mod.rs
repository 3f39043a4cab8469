//! The cluster as decisions see it: an immutable [`Snapshot`] of cached objects, swapped whole when
//! anything changes, plus [`Query`]/[`Answers`] for the few lookups that are not cached.
//!
//! `files` builds snapshots from a folder (dry-run, the embedded default); the live mode builds them
//! from API watches. Decisions never know which.

pub mod controller_finder;
pub mod files;
pub mod live;
pub mod query;
pub mod revisions;
pub mod shared_map;
pub mod sidecarset_index;
pub mod snapshot;

pub use query::{Answers, Counted, ListFilter, Query};
pub use snapshot::{Change, ObjectKey, Snapshot, Stored, TypeKey};
