//! Configuration: stub.
