// CF time coordinates: the calendars of the CF conventions and "<unit> since <date>" units, for the
// NetCDF reader and writer (ERA5 uses the standard calendar, E3SM/CMIP output often noleap).
//
// Every calendar counts exact integer days since its own 0001-01-01; a time is then
// days * 86400 + hour * 3600 + minute * 60 + second, as a double. Years are astronomical in every
// calendar: year 0 exists (the year before 1) and negative years are allowed. (cftime, by default,
// has no year 0 in the standard and julian calendars; the two agree from year 1 on.) Supported years:
// -10'000'000..10'000'000. A double holds whole seconds exactly there; a fraction of a second keeps
// about 16 significant digits of the whole count (~60 microseconds resolution near year 9999).
#pragma once
#include <cstdint>
#include <string>

namespace gs::models {

enum class Calendar { standard, proleptic_gregorian, noleap, all_leap, day360, julian };

// CF calendar names, case-insensitive (surrounding blanks ignored), with synonyms: "standard" and
// "gregorian" (Julian before 1582-10-15, Gregorian from then on; 1582-10-05..14 do not exist),
// "proleptic_gregorian", "noleap" and "365_day", "all_leap" and "366_day", "360_day" (12 months of
// 30 days), "julian". An empty name is the CF default, standard. Anything else throws, listing the
// accepted names.
Calendar parse_calendar(const std::string& name);
// The canonical CF name: "standard", "proleptic_gregorian", "noleap", "all_leap", "360_day", "julian".
const char* calendar_name(Calendar c);

struct DateTime {
  int64_t year = 1;
  int month = 1, day = 1, hour = 0, minute = 0;
  double second = 0;
};

// "1990-01-01 06:00:00"; seconds get a fraction only when they have one ("06:00:01.5", shown to the
// microsecond); years below 1000 are zero-padded to 4 digits, negative years as "-0001-01-01 ...".
// Formats the fields as they are, valid or not (no calendar is involved).
std::string format_datetime(const DateTime& t);

// Seconds since 0001-01-01 00:00:00 of the same calendar (negative before it). Throws for a date or
// time that does not exist in the calendar (Feb 29 1990 in standard, Feb 29 in noleap, Feb 30 in any
// but 360_day, Dec 31 in 360_day, 1582-10-10 in standard, month 13, hour 24, second 60, ...).
double to_seconds(Calendar c, const DateTime& t);
// The inverse of to_seconds: to_seconds(c, from_seconds(c, s)) == s exactly, and
// from_seconds(c, to_seconds(c, t)) == t for whole seconds. Throws for non-finite seconds or a
// result outside the supported years.
DateTime from_seconds(Calendar c, double seconds);

// A CF time coordinate's units: "<unit> since <reference date>[ <time>][ <time zone>]".
struct TimeUnits {
  double seconds_per_unit = 1;
  DateTime reference;
  Calendar calendar = Calendar::standard;
  std::string text;  // as given
};

// unit (case-insensitive): days|day|d, hours|hour|hr|h, minutes|minute|min, seconds|second|sec|s,
// milliseconds|millisecond|ms, microseconds|microsecond|us. The reference as CF/udunits write it:
// "1990-1-1", "1990-01-01 6:00", "1990-01-01T06:00:00Z", "1990-01-01 00:00:00.0",
// "1990-01-01 00:00:00 +0:00" or "... UTC"/"GMT" (a zone other than UTC throws). "months since" and
// "years since" (also common_years, ...) throw: udunits months and years are fixed fractions of a
// tropical year, not the calendar's months and years. A reference date that does not exist in the
// calendar throws.
TimeUnits parse_time_units(const std::string& units, Calendar calendar);
// to_seconds(calendar, reference) + value * seconds_per_unit: seconds since 0001-01-01 of the calendar.
double absolute_seconds(const TimeUnits& u, double value);
// The date and time of a coordinate value: format_datetime(from_seconds(calendar, absolute_seconds(u, value))).
std::string format_time(const TimeUnits& u, double value);
// The value that an absolute time (seconds since 0001-01-01 of u.calendar) has in u; the inverse of
// absolute_seconds.
double value_of(const TimeUnits& u, double absolute);

}  // namespace gs::models
