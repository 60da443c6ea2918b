"""casstore: deterministic Harbor task archives, their store, and safe reading."""
