//! SidecarSet admission: `/mutate-apps-kruise-io-sidecarset` (defaults, then the two hash
//! annotations the pod webhook copies) and `/validate-apps-kruise-io-sidecarset` (field rules and
//! conflicts with the other SidecarSets). Both work on the object as JSON so fields this binary does
//! not model are kept.

pub mod hash;
pub mod quantity;
