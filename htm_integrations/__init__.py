"""Thin adapters that make an :class:`htm_core.HTM` a LangChain or LlamaIndex memory.

Each framework is an optional extra, imported only inside its own subpackage:
``htm_integrations.langchain`` (``pip install -e ".[langchain]"`` in a clone) and
``htm_integrations.llama_index`` (``pip install -e ".[llamaindex]"`` in a clone).
"""

__all__: list[str] = []
