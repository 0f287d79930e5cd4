//! kinformer facade (in progress).
