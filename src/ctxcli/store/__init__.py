"""Where removed text goes and how it comes back."""
