package arm

// BaseURL is the address the cloud serves, for providers that hand out URLs of their own.
func (s *Service) BaseURL() string { return s.o.BaseURL }
