"""Tasks turn a model's logits into a loss (sum, count) and metrics; one per task family."""
