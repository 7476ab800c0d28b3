"""Where removed text goes and how it comes back."""

__all__: list[str] = []
