/// @file
/// The PostgreSQL backend (target statepact::postgres). Includes no libpqxx or libpq header.
#pragma once

#include <statepact/backends/postgres.hpp>
