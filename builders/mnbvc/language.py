"""The language of a conversation from the script of its first characters."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

LANGUAGE_SAMPLE_CHARS = 2000


_KANA, _HANGUL, _CJK, _LATIN = 1, 2, 3, 4


def _script_table() -> np.ndarray:
    """The class of every BMP code point (0: none of the four); a character beyond the BMP is class 0."""
    table = np.zeros(0x10000, dtype=np.uint8)
    table[0x3040:0x3100] = _KANA
    table[0xAC00:0xD7B0] = _HANGUL
    for low, high in ((0x3400, 0x4DC0), (0x4E00, 0xA000), (0xF900, 0xFB00)):
        table[low:high] = _CJK
    table[0x41:0x5B] = _LATIN
    table[0x61:0x7B] = _LATIN
    return table


_SCRIPT_OF = _script_table()


def _script_classes(sample: str) -> np.ndarray:
    """The class of each UTF-16 code unit of ``sample``: a character past the BMP is two surrogates,
    class 0 like the U+FFFF it was clipped to before, so counts and Latin-word boundaries are the same."""
    units = np.frombuffer(sample.encode("utf-16-le", "surrogatepass"), dtype=np.uint16)
    return _SCRIPT_OF.take(units)


def _latin_words(classes: np.ndarray) -> int:
    """Runs of Latin letters among ``classes``."""
    if not len(classes):
        return 0
    letters = classes == _LATIN
    return int(letters[0]) + int(np.count_nonzero(letters[1:] > letters[:-1]))


def detect_language(texts: Iterable[str]) -> str:
    """zh, en, ja or ko from the script of the first characters; zh (MNBVC's language) when unsure.

    The scripts are counted on code units with numpy (one table lookup per character and one count per class:
    four regex scans per conversation were 8% of an MNBVC build); the tests hold the patterns they match.

    A Chinese character carries about as much as a Latin word, so the text is English only when it has
    more Latin words than Chinese characters. Latin words are counted only when that can decide: never
    more than the Latin letters, they matter only when the letters or the Hangul outnumber the CJK.
    """
    sample = ""
    for text in texts:
        sample += text
        if len(sample) >= LANGUAGE_SAMPLE_CHARS:
            break
    classes = _script_classes(sample[:LANGUAGE_SAMPLE_CHARS])
    counts = np.bincount(classes, minlength=5)
    kana, hangul, cjk, letters = (int(counts[kind]) for kind in (_KANA, _HANGUL, _CJK, _LATIN))
    if kana and kana * 5 >= cjk:
        return "ja"
    if hangul > cjk or letters > cjk:
        latin_words = _latin_words(classes)
        if hangul > cjk and hangul >= latin_words:
            return "ko"
        if latin_words > cjk:
            return "en"
    return "zh"
