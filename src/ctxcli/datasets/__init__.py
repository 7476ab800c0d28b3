"""Datasets of trajectories: in-memory rows and records, Ray Data, Hugging Face datasets."""

__all__: list[str] = []
