package aesgcm

//go:generate sh -c "cd _asm && go run . -out ../aesgcm_amd64.s -stubs ../aesgcm_stub_amd64.go -pkg aesgcm"
