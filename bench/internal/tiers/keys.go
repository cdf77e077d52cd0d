package tiers

// tiersKey mirrors the cache package's key layout
// (<prefix>:{p:<id>}:tiers): the raw and fullscan baselines address the
// same sorted set the library reads, and the cleanup relies on the prefix.
func tiersKey(prefix, promo string) string { return prefix + ":{p:" + promo + "}:tiers" }
