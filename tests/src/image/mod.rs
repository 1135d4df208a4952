//! Container images without a container engine: read an OCI image layout and unpack it as a
//! runtime would ([`layout`]), and run its entrypoint in the unpacked root as the image's user
//! with a kubelet's mounts ([`jail`]). `scripts/image` builds the image these test.

pub mod jail;
pub mod layout;

pub use jail::{Container, Mount};
pub use layout::{Descriptor, Image};
