//! The actuator: carries out the policy's decisions.
