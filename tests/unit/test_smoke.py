"""End-to-end smoke test of the facade on a real SQLite file."""

from htm_core import HTM, HashingEmbedder


def test_add_recall_context_roundtrip(sqlite_url, clock):
    with HTM(robot="a", database_url=sqlite_url, embedder=HashingEmbedder(), clock=clock) as htm:
        htm.add("User prefers Vim keybindings", importance=9.0, key="pref-vim")
        htm.add("It rained all day", importance=1.0)
        hits = htm.recall("vim keybindings", limit=1)
        assert [h.memory.key for h in hits] == ["pref-vim"]
        assert "Vim" in htm.create_context(max_tokens=100).text
