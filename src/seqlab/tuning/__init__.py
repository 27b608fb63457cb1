"""Tuning: `seqlab tune` and `seqlab compare --tune-trials` (search spaces in `space`, the study in `study`;
`seqlab.tune` is `study.tune`)."""
