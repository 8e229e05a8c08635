"""Whose memory a surface acting for a user works in: the scope every htm surface shares.

A scope (:class:`ChatScope`) is a user and/or a session, written onto what a surface (an
adapter, the agent tools, the MCP server, ``htm --user``) stores as hierarchical tags
(``chat:user:<user>``, ``chat:session:<session>``) and into its keys
(:meth:`ChatScope.note_key`, :meth:`ChatScope.own_key`), and used as the tag filter of what
it recalls. ``shared_tags`` and ``shared=True`` are the two explicit ways out; a tag in the
scopes' ``chat`` namespace given as an argument is refused (:func:`check_topic_tags`). See
docs/langchain.md ("Whose memory: users and sessions") and docs/mcp.md ("Whose memory").
"""

from __future__ import annotations

import getpass
import hashlib
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .errors import InvalidKeyError, NotFoundError, ValidationError
from .identity import has_prefix
from .models import Memory
from .tags import carries_tag
from .validation import MAX_KEY_LENGTH, check_key, check_tags

__all__ = ["HASHED", "ROOT", "USER_ENV", "ChatScope", "check_topic_tags", "id_slug", "login_user",
           "narrow", "scope_user"]

_SAFE_ID = re.compile(r"[A-Za-z0-9_\-]{1,64}")
ROOT = "chat"
#: What starts a hashed slug.
HASHED = "h-"
#: The form of a hashed slug: an id of this form is hashed too, never kept as it is.
_HASHED_FORM = re.compile(r"h-[0-9a-f]{32}")


def id_slug(value: str, *, name: str = "session_id") -> str:
    """The form of a user or session id used in keys and tags: itself when it is made of
    letters, digits, ``_`` and ``-`` (at most 64) and is not of the hashed form (``h-`` and
    32 hex digits), else ``h-`` + a hash of it. One id, one slug; two ids, two slugs (only
    hashed slugs have the hashed form; ``ada`` and ``ada\\n`` are two ids).

    >>> id_slug("Ada"), id_slug("ada") != id_slug("Ada"), id_slug("a:b")[:2]
    ('Ada', True, 'h-')
    >>> id_slug("ada\\n") == id_slug("ada")
    False
    """
    if not isinstance(value, str) or not value:
        raise ValidationError(f"{name} must be a non-empty string, got {value!r}")
    if _SAFE_ID.fullmatch(value) and not _HASHED_FORM.fullmatch(value):
        return value
    return HASHED + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass(frozen=True, kw_only=True)
class ChatScope:
    """A conversation scope: ``user`` and/or ``session`` slugs, and whether it is shared."""

    session: str | None = None
    user: str | None = None
    shared: bool = False
    shared_tags: tuple[str, ...] = ()

    @classmethod
    def of(cls, *, session_id: str | None = None, user_id: str | None = None,
           shared: bool = False, shared_tags: Iterable[str] | str | None = None) -> ChatScope:
        """The scope of these ids (checked; at least one of them is needed)."""
        if not isinstance(shared, bool):
            raise ValidationError(f"shared must be True or False, got {shared!r}")
        if session_id is None and user_id is None:
            raise ValidationError("a conversation scope needs a session_id or a user_id")
        return cls(session=None if session_id is None else id_slug(session_id),
                   user=None if user_id is None else id_slug(user_id, name="user_id"),
                   shared=shared,
                   shared_tags=check_topic_tags(shared_tags, name="shared_tags"))

    @property
    def tag(self) -> str:
        """The one tag every memory stored in this scope carries."""
        if self.user is None:
            return f"{ROOT}:session:{self.session}"
        if self.session is None:
            return f"{ROOT}:user:{self.user}"
        return f"{ROOT}:user:{self.user}:session:{self.session}"

    @property
    def recall_tag(self) -> str:
        """The tag recall and contexts are scoped to: the user's when there is a user."""
        return f"{ROOT}:user:{self.user}" if self.user is not None else self.tag

    def filter_tags(self, narrower: Iterable[str] | None = None) -> tuple[str, ...] | None:
        """The tag filter of recall and contexts; None for the whole store (``shared``).

        Default: the scope's tag and the ``shared_tags``. ``narrower`` tags replace them
        when each lies within one of them (or the scope is shared); a tag outside an
        unshared scope is refused, since it would widen it.
        """
        return narrow(self.visible, narrower)

    @property
    def visible(self) -> tuple[str, ...] | None:
        """The tags whose memories this scope sees; None when shared (everything)."""
        return None if self.shared else (self.recall_tag, *self.shared_tags)

    def sees(self, tags: Iterable[str]) -> bool:
        """Whether a memory carrying ``tags`` is visible in this scope."""
        return self.visible is None or carries_tag(tags, self.visible)

    def topic_tag(self, tag: str) -> str:
        """A topic tag's copy inside the scope: ``<recall tag>:tag:<tag>`` (a tag already
        inside the scope is itself)."""
        if carries_tag([tag], [self.recall_tag]):
            return tag
        return f"{self.recall_tag}:tag:{tag}"

    def stored_tags(self, tags: Iterable[str] | str | None) -> list[str]:
        """The tags of a memory stored in this scope with topic ``tags``: the scope tag,
        the topic tags, and each topic tag's copy inside the scope (so a topic filter can
        run inside the scope, see :meth:`topic_filter`)."""
        topics = check_tags(tags)
        copies = [self.topic_tag(t) for t in topics]
        return list(dict.fromkeys([self.tag, *topics, *copies]))

    def topic_filter(self, tags: Iterable[str] | str | None) -> tuple[str, ...] | None:
        """The recall filter "memories of this scope with one of ``tags``" (all of the
        scope without tags; the plain tags when shared). A tag inside ``shared_tags`` is
        kept as it is."""
        topics = check_tags(tags)
        if self.visible is None:
            return topics or None
        if not topics:
            return self.visible
        return tuple(dict.fromkeys(
            t if carries_tag([t], self.shared_tags) else self.topic_tag(t) for t in topics))

    def topics(self, counts: dict[str, int]) -> dict[str, int]:
        """The topic tags visible in this scope, from ``htm.tags()``'s counts."""
        if self.visible is None:
            return dict(counts)
        prefix = f"{self.recall_tag}:tag:"
        out = {t[len(prefix):]: n for t, n in counts.items() if has_prefix(t, prefix)}
        out.update({t: n for t, n in counts.items() if carries_tag([t], self.shared_tags)})
        return out

    @property
    def key_prefix(self) -> str:
        """How every key this scope writes begins: its recall tag and ``:``."""
        return f"{self.recall_tag}:"

    def note_key(self, content: str) -> str:
        """The key of ``content`` remembered in this scope without a key of its own:
        ``<recall tag>:note:<hash of the text>``, so the same note said twice by one user
        (in any session, on any surface) is one memory, and the same words of two are two.
        """
        digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        return f"{self.key_prefix}note:{digest}"

    def own_key(self, key: str) -> str:
        """The key a memory given ``key`` is written under in this scope: ``key`` itself
        when it already begins with :attr:`key_prefix`, else ``<recall tag>:key:<key>``.

        >>> scope = ChatScope.of(user_id="ada")
        >>> scope.own_key("pref-vim"), scope.own_key("chat:user:ada:key:pref-vim")
        ('chat:user:ada:key:pref-vim', 'chat:user:ada:key:pref-vim')
        >>> ChatScope.of(user_id="Ada").own_key("chat:user:ada:key:pref-vim")
        'chat:user:Ada:key:chat:user:ada:key:pref-vim'
        """
        key = check_key(key)
        own = self._own_form(key)
        if own is None:
            room = MAX_KEY_LENGTH - len(self.key_prefix) - len("key:")
            raise InvalidKeyError(
                f"key is {len(key)} characters long; in this scope a key is stored with the "
                f"prefix {self.key_prefix + 'key:'!r}, which leaves room for {room}; give a "
                "shorter key")
        return own

    def _own_form(self, key: str) -> str | None:
        """:meth:`own_key` of a checked ``key``; None when the prefixed key is too long."""
        if has_prefix(key, self.key_prefix):
            return key
        own = f"{self.key_prefix}key:{key}"
        return own if len(own) <= MAX_KEY_LENGTH else None

    def find(self, get: Callable[[str], Memory | None], key: str) -> Memory | None:
        """The memory ``key`` names in this scope, looked up with ``get``: the one under
        :meth:`own_key`, else one stored under ``key`` itself that this scope sees (a
        shared memory, say); None when neither is there, whatever other scopes hold."""
        key = check_key(key)
        for candidate in dict.fromkeys((self._own_form(key) or key, key)):
            memory = get(candidate)
            if memory is not None and self.sees(memory.tags):
                return memory
        return None

    def key_of(self, get: Callable[[str], Memory | None], key: str) -> str:
        """The stored key of the memory ``key`` names in this scope (:meth:`find`), else
        :class:`~htm_core.errors.NotFoundError`, the same for a key no memory has and for
        another scope's."""
        memory = self.find(get, key)
        if memory is None:
            raise NotFoundError(f"no memory with key {key!r} in this scope; recall shows "
                                "the keys of its memories")
        return memory.key


def narrow(visible: tuple[str, ...] | None,
           narrower: Iterable[str] | str | None) -> tuple[str, ...] | None:
    """The tag filter of a scope ``visible`` (None: unscoped) narrowed by ``narrower``.

    ``narrower`` tags replace ``visible`` when each lies at or below one of its tags; a tag
    outside would widen the scope and is refused with :class:`ValidationError`.
    """
    extra = check_tags(narrower) if narrower is not None else ()
    if visible is None:
        return extra or None
    outside = [t for t in extra if not carries_tag([t], visible)]
    if outside:
        raise ValidationError(
            f"recall tags {outside} lie outside this memory's scope {list(visible)}, "
            "so they would show other users' or sessions' memories; use tags at or below "
            "the scope's, list them in shared_tags, or pass shared=True to recall across "
            "the whole store")
    return extra or visible


def check_topic_tags(tags: Iterable[str] | str | None, *, name: str = "tags") -> tuple[str, ...]:
    """``tags`` checked (:func:`~htm_core.validation.check_tags`), refusing the scope tags.

    Every tag in the ``chat`` namespace (``chat`` and below, in any letter case) belongs to
    the scopes: a surface acting for a user writes and filters them itself. One given as an
    argument could plant a memory in another user's recall (``chat:user:bob``) or widen a
    scope, so it is refused with :class:`~htm_core.errors.ValidationError`.

    >>> check_topic_tags(["ops", "user:preferences"])
    ('ops', 'user:preferences')
    """
    checked = check_tags(tags)
    reserved = [t for t in checked if t.split(":", 1)[0].casefold() == ROOT]
    if reserved:
        raise ValidationError(
            f"{name} {reserved} lie in the {ROOT!r} namespace, which holds the user and "
            "session scopes and is written only by htm itself; a scope tag given here "
            "could reach another user's memories, so it is refused (nothing was written). "
            "Choose a tag outside it, such as 'ops' or 'user:preferences'")
    return checked


#: The environment variable naming the user a surface acts for when none is given.
USER_ENV = "HTM_USER"


def scope_user(user: str | None = None) -> str | None:
    """The user a command acts for: ``user`` when given, else ``$HTM_USER``, else None.

    The MCP server and the ``htm`` command both choose their user with this, so
    ``htm add --user ada`` and ``htm mcp --user ada`` (or both with ``HTM_USER=ada``)
    work in one scope.
    """
    if user is not None:
        return user
    return os.environ.get(USER_ENV, "").strip() or None


def login_user() -> str:
    """The login name of the account running the process (``"default"`` when it has none)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (some containers)
        return "default"
