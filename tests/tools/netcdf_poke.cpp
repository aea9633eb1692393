// netcdf_poke FILE VARIABLE SAMPLE TIME ROW COLUMN: sets one value of a (sample, time, lat, lon)
// variable to +infinity in place (a bad value: a NaN would be a missing value, masked), so a test
// can damage exactly one rank's tile of a data file (train_mpi_test.sh). Exit status 0 on success,
// 1 with a message otherwise.
#include <netcdf.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: netcdf_poke FILE VARIABLE SAMPLE TIME ROW COLUMN\n");
    return 1;
  }
  int id = 0, var = 0, ndims = 0;
  auto check = [&](int status, const char* what) {
    if (status == NC_NOERR) return;
    std::fprintf(stderr, "netcdf_poke %s: %s: %s\n", argv[1], what, nc_strerror(status));
    std::exit(1);
  };
  check(nc_open(argv[1], NC_WRITE, &id), "open");
  check(nc_inq_varid(id, argv[2], &var), "find the variable");
  check(nc_inq_varndims(id, var, &ndims), "read its dims");
  std::vector<size_t> index;
  for (int k = 4 - ndims; k < 4; ++k) index.push_back(std::strtoul(argv[3 + k], nullptr, 10));
  nc_type type = NC_DOUBLE;
  check(nc_inq_vartype(id, var, &type), "read its type");
  // In the variable's own type: the library refuses to convert an infinite double to float.
  const float bad_f = INFINITY;
  const double bad_d = INFINITY;
  check(type == NC_FLOAT ? nc_put_var1_float(id, var, index.data(), &bad_f)
                         : nc_put_var1_double(id, var, index.data(), &bad_d),
        "write the value");
  check(nc_close(id), "close");
  return 0;
}
