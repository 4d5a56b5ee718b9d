// Package dataplanes holds the tests of the cloud's engine-backed data planes (PostgreSQL
// flexible servers, Azure Cache for Redis) through the Azure SDK for Go and the engines' own
// clients (pgx, go-redis), against one in-process cloud.
package dataplanes
