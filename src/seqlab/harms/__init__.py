"""The harms of language models (SLP 9.5), measured: datasheets of the training data (what a model card
reports about it, contamination included) and audits of a trained model (social bias, memorisation,
toxic generation)."""
