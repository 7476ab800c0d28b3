"""Plain data and rules shared by every layer: the model, errors, hints, cuts, monitors."""

__all__: list[str] = []
