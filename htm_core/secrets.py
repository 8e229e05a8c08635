"""Keeping passwords out of everything htm shows: one masking function for every URL form.

htm shows database addresses in ``stats()``, the CLI, logs and error messages.
:func:`mask_url` (and :func:`mask_text`, the same for free text that may hold an address,
such as a driver's error message) replaces every password with ``***``: in the userinfo
(``user:secret@host``), in query parameters (``password=``, ``sslpassword=``) and in libpq
keyword strings (``password=secret``, quoted values too). See docs/reliability.md.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "mask_text", "mask_url"]

#: What a password is replaced with.
MASK = "***"

# ``//user:password@`` in any scheme, also a malformed ``postgresql//u:p@host``. The password
# runs to the last ``@`` before the host (an unencoded ``@`` in a password stays hidden).
_USERINFO = re.compile(r"(//[^/\s:@?#]*:)[^\s/?#]*@")
# ``password=...`` as a query parameter or a libpq keyword, quoted or not.
_KEYWORD = re.compile(
    r"(?i)(\b(?:ssl)?pass(?:word|wd)?\s*=\s*)"
    r"(?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s&;,)'\"]*)")


def mask_text(text: str) -> str:
    """``text`` with every password it holds, in any URL or keyword form, replaced by ``***``."""
    if "@" not in text and "=" not in text:
        return text
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    return _KEYWORD.sub(lambda m: f"{m.group(1)}{MASK}", text)


def mask_url(url: str) -> str:
    """The database address ``url`` with every password it carries replaced by ``***``.

    >>> mask_url("postgresql://ana:s3cret@db:5432/htm")
    'postgresql://ana:***@db:5432/htm'
    >>> mask_url("postgresql://ana@db/htm?sslmode=require&password=s3cret")
    'postgresql://ana@db/htm?sslmode=require&password=***'
    >>> mask_url("host=db password='s3 cret' dbname=htm")
    'host=db password=*** dbname=htm'
    >>> mask_url("memories.db")
    'memories.db'
    """
    return mask_text(url)
