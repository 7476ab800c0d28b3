"""The composition root: config, presets, the stage runner, the offload store, reduce_bytes and its report."""

__all__: list[str] = []
