package tea

//go:generate sh -c "cd _asm && go run . -out ../tea_amd64.s -stubs ../tea_stub_amd64.go -pkg tea"
