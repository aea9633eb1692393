// CF calendars and time units (models/data/cf_time.h), checked against known day counts, an
// independent proleptic Gregorian (std::chrono) and Julian day numbers, and day-by-day walks.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "models/data/cf_time.h"
#include "tests/test_util.h"

namespace {

using gs::models::Calendar;
using gs::models::DateTime;
using gs::models::TimeUnits;
using gs_test::contains;
using gs_test::error_of;

const Calendar kAll[] = {Calendar::standard, Calendar::proleptic_gregorian, Calendar::noleap,
                         Calendar::all_leap, Calendar::day360,              Calendar::julian};

DateTime date(int64_t y, int m, int d, int hh = 0, int mm = 0, double ss = 0) { return {y, m, d, hh, mm, ss}; }

double days_between(Calendar c, const DateTime& a, const DateTime& b) {
  return (gs::models::to_seconds(c, b) - gs::models::to_seconds(c, a)) / 86400;
}

bool same(const DateTime& a, const DateTime& b) {
  return a.year == b.year && a.month == b.month && a.day == b.day && a.hour == b.hour && a.minute == b.minute &&
         a.second == b.second;
}

// Month lengths written out independently of the library, to walk the calendars day by day.
int month_days(Calendar c, int64_t y, int m) {
  if (c == Calendar::day360) return 30;
  static const int common[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = false;
  if (c == Calendar::all_leap) leap = true;
  if (c == Calendar::julian || (c == Calendar::standard && y <= 1582)) leap = y % 4 == 0;
  if (c == Calendar::proleptic_gregorian || (c == Calendar::standard && y > 1582))
    leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
  return common[m - 1] + (m == 2 && leap);
}

DateTime next_day(Calendar c, DateTime t) {
  if (c == Calendar::standard && t.year == 1582 && t.month == 10 && t.day == 4) return date(1582, 10, 15);
  if (++t.day > month_days(c, t.year, t.month)) {
    t.day = 1;
    if (++t.month > 12) t.month = 1, ++t.year;
  }
  return t;
}

// Julian day number of a Julian-calendar date (valid from year -4800 on).
int64_t julian_jdn(int64_t y, int m, int d) {
  const int64_t a = (14 - m) / 12, yy = y + 4800 - a, mm = m + 12 * a - 3;
  return d + (153 * mm + 2) / 5 + 365 * yy + yy / 4 - 32083;
}

}  // namespace

TEST_CASE("cf time: calendar names") {
  using gs::models::calendar_name;
  using gs::models::parse_calendar;
  CHECK(parse_calendar("standard") == Calendar::standard);
  CHECK(parse_calendar("Gregorian") == Calendar::standard);
  CHECK(parse_calendar("") == Calendar::standard);
  CHECK(parse_calendar("PROLEPTIC_GREGORIAN") == Calendar::proleptic_gregorian);
  CHECK(parse_calendar("noleap") == Calendar::noleap);
  CHECK(parse_calendar("365_day") == Calendar::noleap);
  CHECK(parse_calendar("all_leap") == Calendar::all_leap);
  CHECK(parse_calendar("366_DAY") == Calendar::all_leap);
  CHECK(parse_calendar("360_day") == Calendar::day360);
  CHECK(parse_calendar("julian") == Calendar::julian);
  CHECK(parse_calendar(" noleap ") == Calendar::noleap);
  for (Calendar c : kAll) CHECK(parse_calendar(calendar_name(c)) == c);
  CHECK(std::string(calendar_name(Calendar::day360)) == "360_day");
  CHECK(std::string(calendar_name(Calendar::standard)) == "standard");

  const std::string e = error_of([] { parse_calendar("no_leap_at_all"); });
  CHECK(contains(e, "unknown calendar 'no_leap_at_all'"));
  for (const char* name : {"standard", "gregorian", "proleptic_gregorian", "noleap", "365_day", "all_leap", "366_day",
                           "360_day", "julian"})
    CHECK(contains(e, name));
  CHECK(contains(error_of([] { parse_calendar("none"); }), "unknown calendar 'none'"));
}

TEST_CASE("cf time: format_datetime") {
  using gs::models::format_datetime;
  CHECK(format_datetime(date(1990, 1, 1, 6)) == "1990-01-01 06:00:00");
  CHECK(format_datetime(date(1990, 12, 31, 23, 59, 59)) == "1990-12-31 23:59:59");
  CHECK(format_datetime(date(1990, 1, 1, 6, 0, 1.5)) == "1990-01-01 06:00:01.5");
  CHECK(format_datetime(date(1990, 1, 1, 6, 0, 0.000001)) == "1990-01-01 06:00:00.000001");
  CHECK(format_datetime(date(1990, 1, 1, 6, 0, 59.9999999)) == "1990-01-01 06:00:59.999999");  // never 60
  CHECK(format_datetime(date(1, 1, 1)) == "0001-01-01 00:00:00");
  CHECK(format_datetime(date(850, 3, 9)) == "0850-03-09 00:00:00");
  CHECK(format_datetime(date(0, 3, 1)) == "0000-03-01 00:00:00");
  CHECK(format_datetime(date(-1, 12, 31)) == "-0001-12-31 00:00:00");
  CHECK(format_datetime(date(-12345, 6, 7)) == "-12345-06-07 00:00:00");
  CHECK(format_datetime(date(20000, 1, 1)) == "20000-01-01 00:00:00");
}

TEST_CASE("cf time: known day counts") {
  using gs::models::to_seconds;
  // One year.
  CHECK(days_between(Calendar::standard, date(1990, 1, 1), date(1991, 1, 1)) == 365);
  CHECK(days_between(Calendar::proleptic_gregorian, date(1990, 1, 1), date(1991, 1, 1)) == 365);
  CHECK(days_between(Calendar::noleap, date(1990, 1, 1), date(1991, 1, 1)) == 365);
  CHECK(days_between(Calendar::julian, date(1990, 1, 1), date(1991, 1, 1)) == 365);
  CHECK(days_between(Calendar::all_leap, date(1990, 1, 1), date(1991, 1, 1)) == 366);
  CHECK(days_between(Calendar::day360, date(1990, 1, 1), date(1991, 1, 1)) == 360);
  CHECK(days_between(Calendar::standard, date(2000, 1, 1), date(2001, 1, 1)) == 366);
  CHECK(days_between(Calendar::noleap, date(2000, 1, 1), date(2001, 1, 1)) == 365);
  // Across the end of February 2000 (a Gregorian leap year: divisible by 400).
  CHECK(days_between(Calendar::standard, date(2000, 2, 28), date(2000, 3, 1)) == 2);
  CHECK(days_between(Calendar::proleptic_gregorian, date(2000, 2, 28), date(2000, 3, 1)) == 2);
  CHECK(days_between(Calendar::noleap, date(2000, 2, 28), date(2000, 3, 1)) == 1);
  CHECK(days_between(Calendar::all_leap, date(2000, 2, 28), date(2000, 3, 1)) == 2);
  CHECK(days_between(Calendar::day360, date(2000, 2, 28), date(2000, 3, 1)) == 3);  // Feb 29 and 30
  CHECK(days_between(Calendar::day360, date(2000, 2, 29), date(2000, 3, 1)) == 2);
  CHECK(days_between(Calendar::day360, date(1990, 1, 30), date(1990, 2, 1)) == 1);
  // 1900: not leap in the Gregorian calendar, leap in the Julian.
  CHECK(days_between(Calendar::standard, date(1900, 2, 28), date(1900, 3, 1)) == 1);
  CHECK(days_between(Calendar::proleptic_gregorian, date(1900, 2, 28), date(1900, 3, 1)) == 1);
  CHECK(days_between(Calendar::julian, date(1900, 2, 28), date(1900, 3, 1)) == 2);
  // 1500 is Julian in the standard calendar, so leap there, but not in proleptic_gregorian.
  CHECK(days_between(Calendar::standard, date(1500, 2, 28), date(1500, 3, 1)) == 2);
  CHECK(days_between(Calendar::proleptic_gregorian, date(1500, 2, 28), date(1500, 3, 1)) == 1);
  // The Gregorian reform: 1582-10-04 is followed by 1582-10-15 in the standard calendar only.
  CHECK(days_between(Calendar::standard, date(1582, 10, 4), date(1582, 10, 15)) == 1);
  CHECK(days_between(Calendar::proleptic_gregorian, date(1582, 10, 4), date(1582, 10, 15)) == 11);
  CHECK(days_between(Calendar::julian, date(1582, 10, 4), date(1582, 10, 15)) == 11);
  auto day_after = [](Calendar c, const DateTime& t) {
    return gs::models::format_datetime(gs::models::from_seconds(c, to_seconds(c, t) + 86400));
  };
  CHECK(day_after(Calendar::standard, date(1582, 10, 4)) == "1582-10-15 00:00:00");
  CHECK(day_after(Calendar::proleptic_gregorian, date(1582, 10, 4)) == "1582-10-05 00:00:00");
  CHECK(day_after(Calendar::julian, date(1582, 10, 4)) == "1582-10-05 00:00:00");
  CHECK(day_after(Calendar::standard, date(1582, 10, 15)) == "1582-10-16 00:00:00");
  // From 0001-01-01 to 1970-01-01 (cftime's values): Julian 0001-01-01 is proleptic 0000-12-30.
  CHECK(to_seconds(Calendar::standard, date(1970, 1, 1)) == 719164.0 * 86400);
  CHECK(to_seconds(Calendar::proleptic_gregorian, date(1970, 1, 1)) == 719162.0 * 86400);
  CHECK(to_seconds(Calendar::julian, date(1970, 1, 1)) == 719177.0 * 86400);
  CHECK(to_seconds(Calendar::noleap, date(1970, 1, 1)) == 1969.0 * 365 * 86400);
  CHECK(to_seconds(Calendar::all_leap, date(1970, 1, 1)) == 1969.0 * 366 * 86400);
  CHECK(to_seconds(Calendar::day360, date(1970, 1, 1)) == 1969.0 * 360 * 86400);
  // The origin, the time of day, and the days before the origin (year 0 exists and is leap).
  for (Calendar c : kAll) {
    CHECK(to_seconds(c, date(1, 1, 1)) == 0);
    CHECK(to_seconds(c, date(1, 1, 1, 6, 30, 15.25)) == 6 * 3600 + 30 * 60 + 15.25);
    CHECK(to_seconds(c, date(0, 12, c == Calendar::day360 ? 30 : 31, 23)) == -3600);
  }
  CHECK(to_seconds(Calendar::proleptic_gregorian, date(0, 1, 1)) == -366.0 * 86400);
  CHECK(to_seconds(Calendar::standard, date(0, 1, 1)) == -366.0 * 86400);
  CHECK(to_seconds(Calendar::noleap, date(0, 1, 1)) == -365.0 * 86400);
  CHECK(to_seconds(Calendar::day360, date(-1, 1, 1)) == -720.0 * 86400);
}

TEST_CASE("cf time: proleptic gregorian agrees with std::chrono, julian with julian day numbers") {
  using namespace std::chrono;
  std::mt19937_64 rng(7);
  const sys_days origin = year_month_day(year(1), month(1), day(1));
  for (int i = 0; i < 20000; ++i) {
    const int64_t days = std::uniform_int_distribution<int64_t>(-3650000, 3650000)(rng);  // years ~ -9000..11000
    const year_month_day ymd(origin + std::chrono::days(days));
    const DateTime t = date(int(ymd.year()), int(unsigned(ymd.month())), int(unsigned(ymd.day())));
    REQUIRE(gs::models::to_seconds(Calendar::proleptic_gregorian, t) == double(days) * 86400);
    REQUIRE(same(gs::models::from_seconds(Calendar::proleptic_gregorian, double(days) * 86400), t));
  }
  const int64_t jdn_origin = julian_jdn(1, 1, 1);
  for (int i = 0; i < 20000; ++i) {
    const int64_t y = std::uniform_int_distribution<int64_t>(-4000, 4000)(rng);
    const int m = std::uniform_int_distribution<int>(1, 12)(rng);
    const int d = std::uniform_int_distribution<int>(1, month_days(Calendar::julian, y, m))(rng);
    const double expected = double(julian_jdn(y, m, d) - jdn_origin) * 86400;
    REQUIRE(gs::models::to_seconds(Calendar::julian, date(y, m, d)) == expected);
    if (y < 1582 || (y == 1582 && (m < 10 || (m == 10 && d <= 4))))
      REQUIRE(gs::models::to_seconds(Calendar::standard, date(y, m, d)) == expected);
  }
  // After the reform, the standard calendar is the Gregorian one, shifted by the two days of year 1.
  for (int i = 0; i < 2000; ++i) {
    const int64_t days = std::uniform_int_distribution<int64_t>(577737, 3650000)(rng);  // 1582-10-15 on
    const year_month_day ymd(origin + std::chrono::days(days));
    const DateTime t = date(int(ymd.year()), int(unsigned(ymd.month())), int(unsigned(ymd.day())));
    REQUIRE(gs::models::to_seconds(Calendar::standard, t) == double(days + 2) * 86400);
  }
}

TEST_CASE("cf time: consecutive days follow each calendar's months") {
  // Day n + 1 is the day after day n, for every calendar, through year 0, the reform and 1900/2000.
  for (Calendar c : kAll) {
    for (int64_t start_year : {-3, 1580, 1898, 1999}) {
      const std::string name = gs::models::calendar_name(c);
      CAPTURE(name);
      const double s0 = gs::models::to_seconds(c, date(start_year, 1, 1));
      DateTime expected = date(start_year, 1, 1);
      for (int n = 0; n < 366 * 5; ++n) {
        const DateTime t = gs::models::from_seconds(c, s0 + n * 86400.0);
        REQUIRE(gs::models::format_datetime(t) == gs::models::format_datetime(expected));
        REQUIRE(gs::models::to_seconds(c, t) == s0 + n * 86400.0);
        expected = next_day(c, expected);
      }
    }
  }
}

TEST_CASE("cf time: round trips between dates and seconds") {
  using gs::models::from_seconds;
  using gs::models::to_seconds;
  std::mt19937_64 rng(11);
  for (Calendar c : kAll) {
    const std::string name = gs::models::calendar_name(c);
    CAPTURE(name);
    for (int i = 0; i < 20000; ++i) {
      DateTime t;
      t.year = std::uniform_int_distribution<int64_t>(-9999, 9999)(rng);
      t.month = std::uniform_int_distribution<int>(1, 12)(rng);
      t.day = std::uniform_int_distribution<int>(1, month_days(c, t.year, t.month))(rng);
      if (c == Calendar::standard && t.year == 1582 && t.month == 10 && t.day > 4 && t.day < 15) continue;
      t.hour = std::uniform_int_distribution<int>(0, 23)(rng);
      t.minute = std::uniform_int_distribution<int>(0, 59)(rng);
      t.second = std::uniform_int_distribution<int>(0, 59)(rng);
      if (i % 2) t.second += 0.25 * std::uniform_int_distribution<int>(0, 3)(rng);  // fractions a double holds
      const double s = to_seconds(c, t);
      REQUIRE(same(from_seconds(c, s), t));
    }
    // Seconds to a date and back are exact, fractions included.
    for (int i = 0; i < 20000; ++i) {
      const double s = std::uniform_real_distribution<double>(-3.2e11, 3.2e11)(rng);
      REQUIRE(to_seconds(c, from_seconds(c, s)) == s);
      const double whole = std::floor(s);
      REQUIRE(to_seconds(c, from_seconds(c, whole)) == whole);
    }
    // Just before a day boundary, and before the origin.
    const DateTime late = from_seconds(c, -0.5);
    const char* last_second = c == Calendar::day360 ? "0000-12-30 23:59:59.5" : "0000-12-31 23:59:59.5";
    CHECK(gs::models::format_datetime(late) == last_second);
    CHECK(to_seconds(c, late) == -0.5);
    CHECK(gs::models::format_datetime(from_seconds(c, 86399)) == "0001-01-01 23:59:59");
    CHECK(gs::models::format_datetime(from_seconds(c, 86400)) == "0001-01-02 00:00:00");
  }
  // A decimal fraction comes back to within the resolution of the double near year 9999.
  const DateTime t = date(9999, 12, 31, 23, 59, 59.1);
  CHECK(std::fabs(from_seconds(Calendar::standard, to_seconds(Calendar::standard, t)).second - 59.1) < 1e-4);
  CHECK(std::fabs(from_seconds(Calendar::noleap, to_seconds(Calendar::noleap, date(2000, 1, 1, 0, 0, 0.1))).second -
                  0.1) < 1e-4);
}

TEST_CASE("cf time: dates that do not exist") {
  using gs::models::to_seconds;
  auto err = [](Calendar c, DateTime t) { return error_of([&] { to_seconds(c, t); }); };
  std::string e = err(Calendar::standard, date(1990, 2, 29));
  CHECK(contains(e, "1990-02-29 00:00:00"));
  CHECK(contains(e, "standard calendar"));
  CHECK(contains(e, "expected a day in 1..28"));
  CHECK(contains(e, "got 29"));
  CHECK(contains(err(Calendar::proleptic_gregorian, date(1900, 2, 29)), "1900-02-29"));
  CHECK(contains(err(Calendar::standard, date(1900, 2, 29)), "February 1900 has 28 days"));
  CHECK(err(Calendar::julian, date(1900, 2, 29)) == "(no error)");
  e = err(Calendar::noleap, date(2000, 2, 29));
  CHECK(contains(e, "2000-02-29 00:00:00 does not exist in the noleap calendar"));
  CHECK(err(Calendar::all_leap, date(1990, 2, 29)) == "(no error)");
  for (Calendar c : kAll) {
    if (c == Calendar::day360) continue;
    CHECK(contains(err(c, date(2000, 2, 30)), "2000-02-30"));
    CHECK(contains(err(c, date(2000, 4, 31)), "April 2000 has 30 days"));
    CHECK(err(c, date(2000, 12, 31)) == "(no error)");
  }
  CHECK(err(Calendar::day360, date(2001, 2, 30)) == "(no error)");
  e = err(Calendar::day360, date(2001, 12, 31));
  CHECK(contains(e, "2001-12-31 00:00:00 does not exist in the 360_day calendar"));
  CHECK(contains(e, "expected a day in 1..30"));
  e = err(Calendar::standard, date(1582, 10, 10));
  CHECK(contains(e, "1582-10-10 00:00:00 does not exist in the standard calendar"));
  CHECK(contains(e, "1582-10-04 is followed by 1582-10-15"));
  CHECK(contains(e, "proleptic_gregorian"));
  CHECK(err(Calendar::proleptic_gregorian, date(1582, 10, 10)) == "(no error)");
  CHECK(err(Calendar::julian, date(1582, 10, 10)) == "(no error)");
  e = err(Calendar::noleap, date(1990, 13, 1));
  CHECK(contains(e, "1990-13-01"));
  CHECK(contains(e, "expected a month in 1..12, got 13"));
  CHECK(contains(err(Calendar::noleap, date(1990, 0, 1)), "got 0"));
  CHECK(contains(err(Calendar::noleap, date(1990, 1, 0)), "expected a day in 1..31"));
  CHECK(contains(err(Calendar::standard, date(1990, 1, 1, 24)), "expected an hour in 0..23, got 24"));
  CHECK(contains(err(Calendar::standard, date(1990, 1, 1, 0, 60)), "expected a minute in 0..59, got 60"));
  CHECK(contains(err(Calendar::standard, date(1990, 1, 1, 0, 0, 60)), "expected seconds in [0, 60), got 60"));
  CHECK(contains(err(Calendar::standard, date(1990, 1, 1, 0, 0, -1)), "got -1"));
  CHECK(contains(err(Calendar::standard, date(1990, 1, 1, 0, 0, NAN)), "got nan"));
  CHECK(contains(err(Calendar::standard, date(20'000'000, 1, 1)), "expected a year in -10000000..10000000"));

  CHECK(contains(error_of([] { gs::models::from_seconds(Calendar::standard, NAN); }), "got nan s"));
  CHECK(contains(error_of([] { gs::models::from_seconds(Calendar::standard, INFINITY); }), "expected a finite time"));
  CHECK(contains(error_of([] { gs::models::from_seconds(Calendar::day360, 1e16); }), "expected years"));
}

TEST_CASE("cf time: parse_time_units") {
  using gs::models::format_datetime;
  using gs::models::parse_time_units;
  TimeUnits u = parse_time_units("hours since 1990-01-01T06:00:00Z", Calendar::standard);
  CHECK(u.seconds_per_unit == 3600);
  CHECK(format_datetime(u.reference) == "1990-01-01 06:00:00");
  CHECK(u.calendar == Calendar::standard);
  CHECK(u.text == "hours since 1990-01-01T06:00:00Z");

  u = parse_time_units("days since 1-1-1", Calendar::noleap);
  CHECK(u.seconds_per_unit == 86400);
  CHECK(format_datetime(u.reference) == "0001-01-01 00:00:00");
  CHECK(u.calendar == Calendar::noleap);

  u = parse_time_units("seconds since 1970-01-01 00:00:00.0", Calendar::proleptic_gregorian);
  CHECK(u.seconds_per_unit == 1);
  CHECK(format_datetime(u.reference) == "1970-01-01 00:00:00");

  struct Case {
    const char* units;
    double seconds_per_unit;
    const char* reference;
  };
  const Case cases[] = {
      {"days since 1990-1-1", 86400, "1990-01-01 00:00:00"},
      {"Days Since 1990-01-01 6:00", 86400, "1990-01-01 06:00:00"},
      {"day since 1990-01-01", 86400, "1990-01-01 00:00:00"},
      {"d since 1990-01-01", 86400, "1990-01-01 00:00:00"},
      {"HOURS since 1900-01-01 00:00:00.0", 3600, "1900-01-01 00:00:00"},
      {"hour since 1990-01-01", 3600, "1990-01-01 00:00:00"},
      {"hr since 1990-01-01", 3600, "1990-01-01 00:00:00"},
      {"h since 1990-01-01", 3600, "1990-01-01 00:00:00"},
      {"minutes since 2000-01-01 12:30", 60, "2000-01-01 12:30:00"},
      {"minute since 2000-01-01", 60, "2000-01-01 00:00:00"},
      {"min since 2000-01-01", 60, "2000-01-01 00:00:00"},
      {"second since 2000-01-01", 1, "2000-01-01 00:00:00"},
      {"sec since 2000-01-01", 1, "2000-01-01 00:00:00"},
      {"s since 2000-01-01", 1, "2000-01-01 00:00:00"},
      {"milliseconds since 2000-01-01", 1e-3, "2000-01-01 00:00:00"},
      {"ms since 2000-01-01", 1e-3, "2000-01-01 00:00:00"},
      {"microseconds since 2000-01-01", 1e-6, "2000-01-01 00:00:00"},
      {"us since 2000-01-01", 1e-6, "2000-01-01 00:00:00"},
      {"hours since 1990-01-01 00:00:00 +0:00", 3600, "1990-01-01 00:00:00"},
      {"hours since 1990-01-01 00:00:00 -00:00", 3600, "1990-01-01 00:00:00"},
      {"hours since 1990-01-01 00:00:00+0000", 3600, "1990-01-01 00:00:00"},
      {"hours since 1990-01-01 00:00:00 UTC", 3600, "1990-01-01 00:00:00"},
      {"hours since 1990-01-01 utc", 3600, "1990-01-01 00:00:00"},
      {"hours since 1990-01-01 00:00 GMT", 3600, "1990-01-01 00:00:00"},
      {"hours since 1990-01-01T06:00Z", 3600, "1990-01-01 06:00:00"},
      {"  hours   since   1990-01-01   06:00:01.5  ", 3600, "1990-01-01 06:00:01.5"},
      {"days since -0100-03-01", 86400, "-0100-03-01 00:00:00"},
      {"days since 0000-01-01", 86400, "0000-01-01 00:00:00"},
      {"hours since 1800-1-1 00:00:0.0", 3600, "1800-01-01 00:00:00"},  // NCEP reanalysis
      {"days since 1850-01-01 00:00:00 Z", 86400, "1850-01-01 00:00:00"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.units);
    const TimeUnits t = parse_time_units(c.units, Calendar::standard);
    CHECK(t.seconds_per_unit == c.seconds_per_unit);
    CHECK(format_datetime(t.reference) == c.reference);
    CHECK(t.text == c.units);
  }
  // Dates that exist in one calendar only.
  CHECK(format_datetime(parse_time_units("days since 2000-02-30", Calendar::day360).reference) ==
        "2000-02-30 00:00:00");
  CHECK(format_datetime(parse_time_units("days since 1900-02-29", Calendar::julian).reference) ==
        "1900-02-29 00:00:00");
}

TEST_CASE("cf time: values, absolute seconds and formatted times") {
  using gs::models::absolute_seconds;
  using gs::models::format_time;
  using gs::models::parse_time_units;
  using gs::models::value_of;
  const TimeUnits h = parse_time_units("hours since 1990-01-01 06:00", Calendar::standard);
  CHECK(format_time(h, 0) == "1990-01-01 06:00:00");
  CHECK(format_time(h, 18) == "1990-01-02 00:00:00");
  CHECK(format_time(h, 1.5) == "1990-01-01 07:30:00");
  CHECK(format_time(h, -7) == "1989-12-31 23:00:00");
  CHECK(format_time(h, 365 * 24) == "1991-01-01 06:00:00");
  CHECK(format_time(h, (31 + 28) * 24) == "1990-03-01 06:00:00");
  CHECK(absolute_seconds(h, 2) == gs::models::to_seconds(Calendar::standard, date(1990, 1, 1, 8)));
  CHECK(value_of(h, gs::models::to_seconds(Calendar::standard, date(1990, 1, 2, 6))) == 24);
  CHECK(value_of(h, absolute_seconds(h, 123.25)) == 123.25);

  // Leap days per calendar: 59 days after Jan 1 of 2000.
  const char* units = "days since 2000-01-01";
  CHECK(format_time(parse_time_units(units, Calendar::standard), 59) == "2000-02-29 00:00:00");
  CHECK(format_time(parse_time_units(units, Calendar::proleptic_gregorian), 59) == "2000-02-29 00:00:00");
  CHECK(format_time(parse_time_units(units, Calendar::noleap), 59) == "2000-03-01 00:00:00");
  CHECK(format_time(parse_time_units(units, Calendar::all_leap), 59) == "2000-02-29 00:00:00");
  CHECK(format_time(parse_time_units(units, Calendar::day360), 59) == "2000-02-30 00:00:00");
  CHECK(format_time(parse_time_units(units, Calendar::julian), 59) == "2000-02-29 00:00:00");
  // A typical E3SM coordinate: noleap days since year 1, 2015-01-01 at 735110 = 2014 * 365.
  const TimeUnits e3sm = parse_time_units("days since 0001-01-01 00:00:00", Calendar::noleap);
  CHECK(format_time(e3sm, 735110) == "2015-01-01 00:00:00");
  CHECK(format_time(e3sm, 735110.5) == "2015-01-01 12:00:00");
  CHECK(value_of(e3sm, gs::models::to_seconds(Calendar::noleap, date(2015, 1, 1))) == 735110);
  // ERA5: hours since 1900-01-01, 2020-01-01 is 1051896 hours later (43829 days).
  const TimeUnits era5 = parse_time_units("hours since 1900-01-01 00:00:00.0", gs::models::parse_calendar("gregorian"));
  CHECK(format_time(era5, 1051896) == "2020-01-01 00:00:00");
  CHECK(value_of(era5, gs::models::to_seconds(Calendar::standard, date(2020, 1, 1))) == 1051896);
  const TimeUnits ms = parse_time_units("milliseconds since 1970-01-01", Calendar::proleptic_gregorian);
  CHECK(format_time(ms, 1500) == "1970-01-01 00:00:01.5");
  CHECK(contains(error_of([&] { format_time(h, NAN); }), "expected a finite time"));
}

TEST_CASE("cf time: bad time units") {
  using gs::models::parse_time_units;
  auto err = [](const char* units, Calendar c = Calendar::standard) {
    return error_of([&] { parse_time_units(units, c); });
  };
  std::string e = err("months since 1990-01-01", Calendar::noleap);
  CHECK(contains(e, "'months since 1990-01-01'"));
  CHECK(contains(e, "count in months"));
  CHECK(contains(e, "noleap calendar"));
  CHECK(contains(e, "365.242198781 days"));
  CHECK(contains(e, "year/12"));
  CHECK(contains(e, "re-encode the time coordinate in days or hours"));
  CHECK(contains(e, "cdo settunits,days"));
  CHECK(contains(e, "xarray"));
  for (const char* u : {"month since 1990-01-01", "Years since 0001-01-01", "year since 1990-01-01",
                        "common_years since 1990-01-01", "yr since 1990-01-01"})
    CHECK(contains(err(u), "udunits"));
  CHECK(contains(err("years since 1990-01-01"), "count in years"));

  e = err("fortnights since 1990-01-01");
  CHECK(contains(e, "unknown unit 'fortnights'"));
  CHECK(contains(e, "'fortnights since 1990-01-01'"));
  CHECK(contains(e, "expected days"));

  for (const char* u : {"hours", "hours since", "hours after 1990-01-01", "", "1990-01-01", "hours sincere 1990-01-01"})
    CHECK(contains(err(u), "expected '<unit> since <reference date>'"));

  for (const char* u : {"hours since yesterday", "hours since 1990", "hours since 1990-01", "hours since 1990/01/01",
                        "hours since 1990-01-01 6", "hours since 1990-01-01T", "hours since 1990-01-01 06:00 tomorrow",
                        "hours since 1990-001-01", "hours since 1990-01-01 06:00:00 +0:00 extra",
                        "hours since 1990-01-01 06-00"}) {
    CAPTURE(u);
    e = err(u);
    CHECK(contains(e, "expected a reference date 'YYYY-MM-DD"));
    CHECK(contains(e, std::string("'") + u + "'"));
  }

  e = err("hours since 1990-01-01 00:00:00 +05:30");
  CHECK(contains(e, "expected a reference time in UTC"));
  CHECK(contains(e, "got time zone '+05:30'"));
  CHECK(contains(err("hours since 1990-01-01 00:00 -1"), "got time zone '-1'"));

  e = err("days since 1990-02-29", Calendar::standard);
  CHECK(contains(e, "'days since 1990-02-29'"));
  CHECK(contains(e, "1990-02-29 00:00:00 does not exist in the standard calendar"));
  CHECK(contains(err("days since 2000-02-29", Calendar::noleap), "does not exist in the noleap calendar"));
  CHECK(contains(err("days since 2000-12-31", Calendar::day360), "does not exist in the 360_day calendar"));
  CHECK(contains(err("days since 1582-10-10", Calendar::standard), "1582-10-04 is followed by 1582-10-15"));
  CHECK(contains(err("days since 1990-13-01"), "expected a month in 1..12, got 13"));
  CHECK(contains(err("days since 1990-01-01 24:00"), "expected an hour in 0..23, got 24"));
  CHECK(contains(err("days since 1990-01-01 00:00:60"), "expected seconds in [0, 60), got 60"));
}
