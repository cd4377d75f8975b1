"""Time zone names people get wrong (issue 25): abbreviations and typos, each with the IANA name
to write instead. Only called for a name that is unknown or an abbreviation, so the tick never
lists the zone database (zoneinfo.available_timezones reads it from disk: ~30 ms)."""

from __future__ import annotations

# Abbreviations mean a region's civil time; these are the usual regions. Those that are also
# zone names (EST, MST, HST, CET, EET, WET, MET, EST5EDT, ...) are fixed offsets or old rules:
# valid, but not what a person writing them means (EST has no daylight saving time).
ABBREVIATIONS = {
    "EST": "America/New_York", "EDT": "America/New_York", "EST5EDT": "America/New_York",
    "CST": "America/Chicago", "CDT": "America/Chicago", "CST6CDT": "America/Chicago",
    "MST": "America/Denver", "MDT": "America/Denver", "MST7MDT": "America/Denver",
    "PST": "America/Los_Angeles", "PDT": "America/Los_Angeles",
    "PST8PDT": "America/Los_Angeles", "HST": "Pacific/Honolulu", "AKST": "America/Anchorage",
    "GMT": "Europe/London", "BST": "Europe/London", "WET": "Europe/Lisbon",
    "CET": "Europe/Paris", "CEST": "Europe/Paris", "MET": "Europe/Paris",
    "EET": "Europe/Helsinki", "EEST": "Europe/Helsinki", "MSK": "Europe/Moscow",
    "IST": "Asia/Kolkata", "JST": "Asia/Tokyo", "KST": "Asia/Seoul",
    "AEST": "Australia/Sydney", "AEDT": "Australia/Sydney", "NZST": "Pacific/Auckland",
}
_FINE = {"UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z"}  # deliberate UTC: never warned about


def abbreviation_warning(name: str) -> str | None:
    """For a valid zone name that is an abbreviation (EST): what it is and what to write."""
    if name in _FINE or name.upper() not in ABBREVIATIONS:
        return None
    region = ABBREVIATIONS[name.upper()]
    return (f"{name!r} is an abbreviation, not a region: as a zone it keeps a fixed offset or "
            f"old rules (EST stays UTC-5 in summer); write the region's IANA name, e.g. {region}")


def unknown_zone(name: object) -> str:
    """The message for a name that is no zone: the nearest real name when there is one."""
    text = str(name)
    hint = "use an IANA name like Europe/Riga or America/New_York"
    near = suggest(text)
    if near:
        hint = f"did you mean {near}?"
    return f"unknown time zone {text!r}; {hint}"


def suggest(name: str) -> str | None:
    """The region for an abbreviation, else the closest IANA name (case and spaces forgiven)."""
    if name.upper() in ABBREVIATIONS:
        return ABBREVIATIONS[name.upper()]
    import difflib  # lazy: only for a misspelt zone
    import zoneinfo  # lazy: as difflib

    names = sorted(zoneinfo.available_timezones())
    by_lower = {n.lower(): n for n in names}
    wanted = name.strip().replace(" ", "_").lower()
    if wanted in by_lower:
        return by_lower[wanted]
    near = difflib.get_close_matches(wanted, list(by_lower), n=1, cutoff=0.6)
    if near:
        return by_lower[near[0]]
    city = wanted.rpartition("/")[2]  # "Europe/Riaga" -> "riaga" against the cities
    cities = {n.rpartition("/")[2].lower(): n for n in names if "/" in n}
    near = difflib.get_close_matches(city, list(cities), n=1, cutoff=0.75)
    return cities[near[0]] if near else None
