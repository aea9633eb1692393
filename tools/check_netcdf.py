#!/usr/bin/env python3
"""Checks gradsphere's NetCDF files against xarray / netCDF4, and makes files for its reader.

A reference tool: not part of the build or the tests. It needs `xarray`, `netCDF4` and `numpy`,
e.g. in the reference environment outside the repository:

    /opt/gs-ref/bin/pip install xarray netCDF4 numpy

    check_netcdf.py read FILE    FILE was written by gradsphere's write_netcdf. Opens it with
                                 xarray (CF decoding on: times become datetime64) and with netCDF4,
                                 checks the CF attributes (Conventions, lat/lon units and standard
                                 names, time units and calendar), that latitudes run north to south
                                 and longitudes from 0 east in equal steps, that every data variable
                                 is (time, lat, lon) or (sample, time, lat, lon) with units and
                                 long_name where expected, and prints the dataset.
    check_netcdf.py write FILE   Writes FILE with xarray as a typical reanalysis file would be:
                                 latitudes south to north (equiangular, 9 rows, float32),
                                 longitudes from -180 (16 columns), time in "days since" units
                                 every 6 hours (5 steps), and variables t2m = 100*t + 10*i + j at
                                 file row i, file column j and u10 = -t2m, float32 with
                                 xarray's default _FillValue (NaN). gradsphere's read_netcdf must
                                 flip and roll it back.

Exit status 0 when every check passes, 1 otherwise.
"""
import sys


def check_read(path):
    import netCDF4
    import numpy as np
    import xarray as xr

    ok = True

    def expect(cond, what):
        nonlocal ok
        if not cond:
            print(f"FAIL {what}")
            ok = False

    ds = xr.open_dataset(path)  # decode_cf: times, _FillValue, scale factors
    print(ds)
    expect(ds.attrs.get("Conventions") == "CF-1.8", "global Conventions = CF-1.8")
    expect("title" in ds.attrs and "history" in ds.attrs, "global title and history")
    lat, lon = ds["lat"], ds["lon"]
    expect(lat.attrs.get("units") == "degrees_north" and lat.attrs.get("standard_name") == "latitude", "lat attrs")
    expect(lon.attrs.get("units") == "degrees_east" and lon.attrs.get("standard_name") == "longitude", "lon attrs")
    expect(bool(np.all(np.diff(lat.values) < 0)), "latitudes north to south")
    expect(lon.values[0] == 0.0 and np.allclose(np.diff(lon.values), 360.0 / lon.size), "longitudes 0, 360/n, ...")
    expect(np.issubdtype(ds["time"].dtype, np.datetime64), "time decoded to datetime64")
    data_vars = list(ds.data_vars)
    expect(len(data_vars) > 0, "at least one data variable")
    for name in data_vars:
        dims = ds[name].dims
        expect(dims in (("time", "lat", "lon"), ("sample", "time", "lat", "lon")), f"{name} dims {dims}")
        expect("long_name" in ds[name].attrs, f"{name} has long_name")
        expect(bool(np.isfinite(ds[name].values).all()), f"{name} values finite")

    with netCDF4.Dataset(path) as nc:
        t = nc["time"]
        expect(t.units.startswith("hours since "), f"time units '{t.units}'")
        expect(t.calendar == "standard", f"time calendar '{t.calendar}'")
        expect(nc.data_model == "NETCDF4", f"data model {nc.data_model}")
    print("OK" if ok else "FAILED")
    return ok


def check_write(path):
    import numpy as np
    import pandas as pd
    import xarray as xr

    nlat, nlon, nt = 9, 16, 5
    lat_north_first = 90.0 - 180.0 * np.arange(nlat) / (nlat - 1)
    lat = lat_north_first[::-1].astype(np.float32)  # south to north
    lon = -180.0 + 360.0 * np.arange(nlon) / nlon
    time = pd.date_range("1979-01-01", periods=nt, freq="6h")
    t, i, j = np.meshgrid(np.arange(nt), np.arange(nlat), np.arange(nlon), indexing="ij")
    t2m = (100.0 * t + 10.0 * i + j).astype(np.float32)
    ds = xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), t2m, {"units": "K", "long_name": "2 m temperature"}),
            "u10": (("time", "lat", "lon"), -t2m, {"units": "m s-1"}),
        },
        coords={"time": time, "lat": ("lat", lat, {"units": "degrees_north"}), "lon": ("lon", lon)},
    )
    ds.to_netcdf(path, encoding={"time": {"units": "days since 1979-01-01", "dtype": "float64"}})
    print(f"wrote {path}")
    return True


def main(argv):
    if len(argv) != 3 or argv[1] not in ("read", "write"):
        print(__doc__)
        return 2
    return 0 if (check_read if argv[1] == "read" else check_write)(argv[2]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
