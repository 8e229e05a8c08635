"""Thin adapters that make an :class:`htm_core.HTM` a LangChain or LlamaIndex memory.

Each framework is an optional extra, imported only inside its own subpackage:
``htm_integrations.langchain`` (``pip install "htm-memory[langchain]"``) and
``htm_integrations.llama_index`` (``pip install "htm-memory[llamaindex]"``).
"""

__all__: list[str] = []
