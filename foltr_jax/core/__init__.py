"""The lowest layer: numerics (metrics, rankers, Plackett-Luce, click models, privacy),
the registries and the files (stored arrays, several processes).  It imports nothing else
of the package."""
