"""Linkers written to another release's interface (loadability only: their methods do nothing)."""

from __future__ import annotations

from typing import Any, Optional


class _Methods:
    def lookup(self, rid: str, transfers: list[Any]) -> list[int]:
        return []

    def load(self, rid: str, transfers: list[Any]) -> bool:
        return False

    def start_layer_wise_loading(self) -> int:
        return -1

    def cancel_queued_load(self, rid: str) -> bool:
        return False

    def num_completed_offloads(self) -> int:
        return 0

    def pop_completed_offload(self) -> bool:
        return False

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass


class Linker0521(_Methods):
    """0.5.21's interface: the completed-load queue, offload(transfers), built-in constructor."""

    def __init__(self, server_args: Any, params: Any, *, components: Any) -> None:
        pass

    def num_completed_loads(self) -> int:
        return 0

    def pop_completed_load(self) -> list[str]:
        return []

    def offload(self, transfers: list[Any]) -> bool:
        return False


class Linker0522(_Methods):
    """0.5.22's interface: finish_layer_wise_loading, offload(transfers) without session_id."""

    def __init__(self, server_args: Any, params: Any, *, components: Any, extra_config: Any = None) -> None:
        pass

    def finish_layer_wise_loading(self, counter_index: int) -> bool:
        return True

    def offload(self, transfers: list[Any]) -> bool:
        return False


class Linker0523(Linker0522):
    """0.5.23's interface."""

    def __init__(
        self, server_args: Any, params: Any, *, components: Any, extra_config: Any = None, forward_stream: Any = None
    ) -> None:
        pass

    def offload(self, transfers: list[Any], session_id: Optional[str] = None) -> bool:
        return False
