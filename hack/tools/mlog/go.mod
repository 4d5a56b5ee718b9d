module monis.app/mlog

go 1.23
