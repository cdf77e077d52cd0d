package tiers

// Key mirrors the cache package's key layout (<prefix>:{p:<id>}:tiers):
// the raw and fullscan baselines, and the storm's go-redis floor, address
// the same sorted set the library reads, and the cleanup relies on the
// prefix.
func Key(prefix, promo string) string { return prefix + ":{p:" + promo + "}:tiers" }
