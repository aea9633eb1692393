// CF calendars and time units (see cf_time.h). Dates become exact int64 day counts per calendar
// (days-from-civil algorithms, H. Hinnant), so differences and round trips never drift.
#include "models/data/cf_time.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string_view>
#include <utility>

#include "engine/error.h"

namespace gs::models {
namespace {

constexpr int64_t kMaxYear = 10'000'000;
constexpr const char* kMonthNames[] = {"January", "February", "March",     "April",   "May",      "June",
                                       "July",    "August",   "September", "October", "November", "December"};
constexpr int kCommonMonthDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Day of the year counted from March 1 (0..365), which puts the leap day last: the trick that makes
// the day-count algorithms below closed-form.
int64_t march_day_of_year(int m, int d) { return (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; }

struct Ymd {
  int64_t y;
  int m, d;
};

Ymd ymd_from_march(int64_t year_of_march, int64_t doy) {
  const int64_t mp = (5 * doy + 2) / 153;
  const int d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  const int m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  return {year_of_march + (m <= 2), m, d};
}

// Proleptic Gregorian: days since 0000-03-01 (400-year eras of 146097 days).
int64_t gregorian_days(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = floor_div(y, 400), yoe = y - era * 400;
  return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + march_day_of_year(m, d);
}
Ymd gregorian_ymd(int64_t days) {
  const int64_t era = floor_div(days, 146097), doe = days - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  return ymd_from_march(yoe + era * 400, doe - (365 * yoe + yoe / 4 - yoe / 100));
}

// Julian: days since 0000-03-01 of the Julian calendar (4-year cycles of 1461 days).
int64_t julian_days(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t cycle = floor_div(y, 4), yoc = y - cycle * 4;
  return cycle * 1461 + yoc * 365 + march_day_of_year(m, d);
}
Ymd julian_ymd(int64_t days) {
  const int64_t cycle = floor_div(days, 1461), doc = days - cycle * 1461;
  const int64_t yoc = (doc - doc / 1460) / 365;
  return ymd_from_march(yoc + cycle * 4, doc - 365 * yoc);
}

// The standard calendar switches from Julian to Gregorian after 1582-10-04 (Julian), which is
// followed by 1582-10-15 (Gregorian). Both halves count from Julian 0001-01-01.
const int64_t kJulianEpoch = julian_days(1, 1, 1);
const int64_t kGregorianEpoch = gregorian_days(1, 1, 1);
const int64_t kFirstGregorianDay = julian_days(1582, 10, 4) - kJulianEpoch + 1;  // 1582-10-15
const int64_t kGregorianShift = gregorian_days(1582, 10, 15) - kFirstGregorianDay;

bool after_switch(int64_t y, int m, int d) { return y > 1582 || (y == 1582 && (m > 10 || (m == 10 && d >= 15))); }

bool is_leap(Calendar c, int64_t y) {
  const bool julian = y % 4 == 0, gregorian = julian && (y % 100 != 0 || y % 400 == 0);
  switch (c) {
    case Calendar::standard: return y < 1583 ? julian : gregorian;  // 1582 is common in both
    case Calendar::proleptic_gregorian: return gregorian;
    case Calendar::julian: return julian;
    case Calendar::all_leap: return true;
    case Calendar::noleap:
    case Calendar::day360: return false;
  }
  return false;
}

int days_in_month(Calendar c, int64_t y, int m) {
  if (c == Calendar::day360) return 30;
  return kCommonMonthDays[m - 1] + (m == 2 && is_leap(c, y));
}

int year_length(Calendar c) { return c == Calendar::day360 ? 360 : c == Calendar::all_leap ? 366 : 365; }

// Days since 0001-01-01 of calendar c; the date must be valid (check_datetime).
int64_t day_number(Calendar c, int64_t y, int m, int d) {
  switch (c) {
    case Calendar::proleptic_gregorian: return gregorian_days(y, m, d) - kGregorianEpoch;
    case Calendar::julian: return julian_days(y, m, d) - kJulianEpoch;
    case Calendar::standard:
      return after_switch(y, m, d) ? gregorian_days(y, m, d) - kGregorianShift : julian_days(y, m, d) - kJulianEpoch;
    default: break;
  }
  int64_t before = 0;  // days of the months before m in a fixed-length year
  for (int k = 1; k < m; ++k) before += days_in_month(c, y, k);
  return (y - 1) * year_length(c) + before + d - 1;
}

Ymd date_of_day(Calendar c, int64_t days) {
  switch (c) {
    case Calendar::proleptic_gregorian: return gregorian_ymd(days + kGregorianEpoch);
    case Calendar::julian: return julian_ymd(days + kJulianEpoch);
    case Calendar::standard:
      return days >= kFirstGregorianDay ? gregorian_ymd(days + kGregorianShift) : julian_ymd(days + kJulianEpoch);
    default: break;
  }
  const int64_t len = year_length(c), y = floor_div(days, len) + 1;
  int64_t doy = days - (y - 1) * len;
  int m = 1;
  while (doy >= days_in_month(c, y, m)) doy -= days_in_month(c, y, m++);
  return {y, m, static_cast<int>(doy) + 1};
}

void check_datetime(Calendar c, const DateTime& t) {
  const char* cal = calendar_name(c);
  auto bad = [&](const std::string& why) {
    fail("date {} does not exist in the {} calendar: {}", format_datetime(t), cal, why);
  };
  if (t.year < -kMaxYear || t.year > kMaxYear)
    bad(fmt::format("expected a year in {}..{}, got {}", -kMaxYear, kMaxYear, t.year));
  if (t.month < 1 || t.month > 12) bad(fmt::format("expected a month in 1..12, got {}", t.month));
  const int ndays = days_in_month(c, t.year, t.month);
  if (t.day < 1 || t.day > ndays)
    bad(fmt::format("expected a day in 1..{} ({} {} has {} days), got {}", ndays, kMonthNames[t.month - 1], t.year,
                    ndays, t.day));
  if (c == Calendar::standard && t.year == 1582 && t.month == 10 && t.day > 4 && t.day < 15)
    bad("1582-10-05..1582-10-14 were skipped when the Julian calendar gave way to the Gregorian (1582-10-04 is "
        "followed by 1582-10-15); use the proleptic_gregorian calendar for Gregorian dates before 1582-10-15");
  if (t.hour < 0 || t.hour > 23) bad(fmt::format("expected an hour in 0..23, got {}", t.hour));
  if (t.minute < 0 || t.minute > 59) bad(fmt::format("expected a minute in 0..59, got {}", t.minute));
  if (!(t.second >= 0 && t.second < 60)) bad(fmt::format("expected seconds in [0, 60), got {}", t.second));
}

// A whole number of 1..max_digits digits at s[i], advancing i; -1 when there is none.
int64_t read_digits(std::string_view s, size_t& i, size_t max_digits) {
  const size_t start = i;
  while (i < s.size() && i - start < max_digits && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == start || (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))) return -1;
  int64_t v = 0;
  std::from_chars(s.data() + start, s.data() + i, v);
  return v;
}

// The reference of time units: [-]Y-M-D[(T| )h:m[:s[.f]]][ ](Z|UTC|GMT|±h[[:]mm]), as udunits reads it.
DateTime parse_reference(std::string_view r, const std::string& units) {
  auto garbage = [&](const char* why) {
    fail("time units '{}': expected a reference date 'YYYY-MM-DD[ hh:mm[:ss[.fff]]][ UTC]' after 'since', "
         "e.g. 'hours since 1990-01-01 00:00:00', but '{}' {}",
         units, r, why);
  };
  DateTime t;
  size_t i = 0;
  const bool negative = i < r.size() && r[i] == '-';
  if (i < r.size() && (r[i] == '-' || r[i] == '+')) ++i;
  const int64_t y = read_digits(r, i, 8);
  if (y < 0) garbage("does not start with a year");
  t.year = negative ? -y : y;
  int64_t field[2];
  for (int64_t& f : field) {
    if (i >= r.size() || r[i] != '-' || (f = read_digits(r, ++i, 2)) < 0) garbage("is not a year-month-day date");
  }
  t.month = static_cast<int>(field[0]);
  t.day = static_cast<int>(field[1]);
  const size_t after_date = i;
  if (i < r.size() && (r[i] == 'T' || r[i] == 't')) ++i;
  while (i < r.size() && r[i] == ' ') ++i;
  if (i < r.size() && std::isdigit(static_cast<unsigned char>(r[i]))) {
    const int64_t h = read_digits(r, i, 2);
    int64_t m = -1;
    if (h < 0 || i >= r.size() || r[i] != ':' || (m = read_digits(r, ++i, 2)) < 0)
      garbage("has a time that is not hh:mm[:ss]");
    t.hour = static_cast<int>(h);
    t.minute = static_cast<int>(m);
    if (i < r.size() && r[i] == ':') {
      const size_t start = ++i;
      if (read_digits(r, i, 2) < 0) garbage("has seconds that are not ss[.fff]");
      if (i < r.size() && r[i] == '.')
        for (++i; i < r.size() && std::isdigit(static_cast<unsigned char>(r[i]));) ++i;
      std::from_chars(r.data() + start, r.data() + i, t.second);
    }
  } else if (i == after_date + 1 && r[after_date] != ' ') {
    garbage("has a 'T' with no time after it");
  }
  while (i < r.size() && r[i] == ' ') ++i;
  const std::string_view zone = r.substr(i);
  const std::string z = lower(zone);
  if (z.empty() || z == "z" || z == "utc" || z == "gmt") return t;
  if (z[0] == '+' || z[0] == '-') {  // an offset: ±h, ±hh:mm or ±hhmm, which must be zero
    size_t k = 1;
    const int64_t a = read_digits(z, k, 4);
    int64_t b = 0;
    if (a >= 0 && k < z.size() && z[k] == ':') b = read_digits(z, ++k, 2);
    if (a >= 0 && b >= 0 && k == z.size()) {
      GS_CHECK(a == 0 && b == 0,
               "time units '{}': expected a reference time in UTC ('Z', 'UTC' or '+0:00'), got time zone '{}'; "
               "convert the reference time to UTC",
               units, zone);
      return t;
    }
  }
  garbage("ends in text that is neither a time nor a UTC time zone");
  return t;
}

}  // namespace

Calendar parse_calendar(const std::string& name) {
  const std::string n = lower(trim(name));
  if (n.empty() || n == "standard" || n == "gregorian") return Calendar::standard;
  if (n == "proleptic_gregorian") return Calendar::proleptic_gregorian;
  if (n == "noleap" || n == "365_day") return Calendar::noleap;
  if (n == "all_leap" || n == "366_day") return Calendar::all_leap;
  if (n == "360_day") return Calendar::day360;
  if (n == "julian") return Calendar::julian;
  fail("unknown calendar '{}'; expected one of the CF calendars: standard (or gregorian), proleptic_gregorian, "
       "noleap (or 365_day), all_leap (or 366_day), 360_day, julian (case-insensitive; empty means standard)",
       name);
}

const char* calendar_name(Calendar c) {
  switch (c) {
    case Calendar::standard: return "standard";
    case Calendar::proleptic_gregorian: return "proleptic_gregorian";
    case Calendar::noleap: return "noleap";
    case Calendar::all_leap: return "all_leap";
    case Calendar::day360: return "360_day";
    case Calendar::julian: return "julian";
  }
  return "unknown";
}

std::string format_datetime(const DateTime& t) {
  const std::string year = t.year < 0 ? fmt::format("-{:04}", -t.year) : fmt::format("{:04}", t.year);
  std::string sec;
  if (t.second == std::floor(t.second)) {
    sec = fmt::format("{:02}", static_cast<int64_t>(t.second));
  } else {
    sec = fmt::format("{:09.6f}", t.second);
    // Rounding to the microsecond must not show 60 (a carry would need the calendar): truncate then.
    if (sec.rfind("60", 0) == 0) sec = fmt::format("{:09.6f}", std::floor(t.second * 1e6) / 1e6);
    sec.erase(sec.find_last_not_of('0') + 1);
    if (sec.back() == '.') sec.pop_back();
  }
  return fmt::format("{}-{:02}-{:02} {:02}:{:02}:{}", year, t.month, t.day, t.hour, t.minute, sec);
}

double to_seconds(Calendar c, const DateTime& t) {
  check_datetime(c, t);
  const int64_t whole = day_number(c, t.year, t.month, t.day) * 86400 + t.hour * 3600 + t.minute * 60;
  return static_cast<double>(whole) + t.second;  // the integer part is exact, so a single rounding
}

DateTime from_seconds(Calendar c, double seconds) {
  // 1e17 s (3e9 years) keeps the int64 arithmetic far from overflow; the year check is the real limit.
  GS_CHECK(std::isfinite(seconds) && std::fabs(seconds) < 1e17,
           "expected a finite time within years {}..{} (seconds since 0001-01-01 of the {} calendar), got {} s",
           -kMaxYear, kMaxYear, calendar_name(c), seconds);
  int64_t days = static_cast<int64_t>(std::floor(seconds / 86400));
  double rem = seconds - static_cast<double>(days) * 86400;  // exact: the result is representable
  if (rem < 0) rem += 86400, --days;                          // the division may round across a day
  if (rem >= 86400) rem -= 86400, ++days;
  const Ymd d = date_of_day(c, days);
  GS_CHECK(d.y >= -kMaxYear && d.y <= kMaxYear,
           "{} s since 0001-01-01 is in year {} of the {} calendar; expected years {}..{}", seconds, d.y,
           calendar_name(c), -kMaxYear, kMaxYear);
  DateTime t{d.y, d.m, d.d};
  const int64_t whole = static_cast<int64_t>(rem);  // 0..86399
  t.hour = static_cast<int>(whole / 3600);
  t.minute = static_cast<int>(whole % 3600 / 60);
  t.second = rem - static_cast<double>(t.hour * 3600 + t.minute * 60);
  return t;
}

TimeUnits parse_time_units(const std::string& units, Calendar calendar) {
  const std::string_view text = trim(units);
  const size_t unit_end = std::min(text.size(), text.find_first_of(" \t"));
  const std::string unit = lower(text.substr(0, unit_end));
  const std::string_view rest = trim(text.substr(unit_end));
  const bool since = rest.size() >= 5 && lower(rest.substr(0, 5)) == "since" &&
                     (rest.size() == 5 || std::isspace(static_cast<unsigned char>(rest[5])));
  GS_CHECK(since && !trim(rest.substr(5)).empty(),
           "time units '{}' are not CF time units; expected '<unit> since <reference date>', e.g. "
           "'hours since 1990-01-01 00:00:00'",
           units);
  const std::string_view unit_text = text.substr(0, unit_end);
  static constexpr std::pair<const char*, double> kUnits[] = {
      {"days", 86400}, {"day", 86400}, {"d", 86400}, {"hours", 3600}, {"hour", 3600}, {"hr", 3600}, {"h", 3600},
      {"minutes", 60}, {"minute", 60}, {"min", 60}, {"seconds", 1}, {"second", 1}, {"sec", 1}, {"s", 1},
      {"milliseconds", 1e-3}, {"millisecond", 1e-3}, {"ms", 1e-3},
      {"microseconds", 1e-6}, {"microsecond", 1e-6}, {"us", 1e-6}};
  const auto* found = std::find_if(std::begin(kUnits), std::end(kUnits), [&](auto& p) { return unit == p.first; });
  if (found == std::end(kUnits)) {
    // udunits spellings of months and years (and their fixed-length kin).
    static constexpr const char* kYearUnits[] = {
        "month",       "months",       "mon",       "year",       "years",       "yr",           "yrs",
        "common_year", "common_years", "leap_year", "leap_years", "julian_year", "julian_years", "gregorian_year",
        "gregorian_years"};
    GS_CHECK(std::find(std::begin(kYearUnits), std::end(kYearUnits), unit) == std::end(kYearUnits),
             "time units '{}' count in {}, which are not the months or years of the {} calendar: udunits (and so "
             "CF) defines a month as a year/12 and a year as 365.242198781 days, so the steps of this coordinate "
             "do not fall on calendar months or years, and CF recommends against these units; re-encode the time "
             "coordinate in days or hours (e.g. `cdo settunits,days in.nc out.nc`, or decode and re-encode it "
             "with xarray) and read it again",
             units, unit_text, calendar_name(calendar));
    fail("time units '{}' have the unknown unit '{}'; expected days (day, d), hours (hour, hr, h), minutes "
         "(minute, min), seconds (second, sec, s), milliseconds (ms) or microseconds (us), followed by "
         "'since <reference date>'",
         units, unit_text);
  }
  TimeUnits u;
  u.calendar = calendar;
  u.text = units;
  u.seconds_per_unit = found->second;
  u.reference = parse_reference(trim(rest.substr(5)), units);
  try {
    to_seconds(calendar, u.reference);
  } catch (const Error& e) {
    fail("time units '{}' have an invalid reference: {}", units, e.what());
  }
  return u;
}

double absolute_seconds(const TimeUnits& u, double value) {
  return to_seconds(u.calendar, u.reference) + value * u.seconds_per_unit;
}

std::string format_time(const TimeUnits& u, double value) {
  return format_datetime(from_seconds(u.calendar, absolute_seconds(u, value)));
}

double value_of(const TimeUnits& u, double absolute) {
  return (absolute - to_seconds(u.calendar, u.reference)) / u.seconds_per_unit;
}

}  // namespace gs::models
